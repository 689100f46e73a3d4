"""groupcoord.actors: the coordinator as a service on Ray (partition actors, router, service API)."""

from .service import Service, ServiceError, connect, start, stop

__all__ = ["Service", "ServiceError", "connect", "start", "stop"]
