"""The names under which a service registers its actors in its Ray namespace."""

ROUTER_NAME = "groupcoord-router"


def partition_actor_name(partition: int) -> str:
    """The registered name of a partition actor in its namespace."""
    return f"groupcoord-partition-{partition}"
