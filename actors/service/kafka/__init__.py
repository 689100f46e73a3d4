"""groupcoord speaks Kafka: a Kafka-protocol listener that Kafka's own clients and tools use unchanged.

`listener.py` frames and dispatches, `codec.py` is the glue to kio (Kafka's messages generated
from its JSON schemas), `handlers_*.py` translate each API to the protocol's requests, `bridge.py`
reaches the partition actors (through the client's coalescer) and the router, `sasl.py` and
`sasl_verifier.py` log connections in with SASL/PLAIN as the service's principals when it
authorizes, `actor.py` runs it all in a Ray actor.
"""

from .actor import (
    KAFKA_LISTENER_NAME,
    KafkaListenerActor,
    ensure_listener,
    listener_bootstrap,
    parse_listener,
    stop_listener,
)
from .apis import APIS
from .bridge import ServiceBridge
from .listener import KafkaListener

__all__ = [
    "APIS",
    "KAFKA_LISTENER_NAME",
    "KafkaListener",
    "KafkaListenerActor",
    "ServiceBridge",
    "ensure_listener",
    "listener_bootstrap",
    "parse_listener",
    "stop_listener",
]
