"""The names the Kafka-wire tests share: the service's namespace and the registry topic its listener serves."""

NAMESPACE = "gc-test-kafka-wire"
TOPIC = "orders"
