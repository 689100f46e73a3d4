"""`groupcoord principals`, `groupcoord acls` and `groupcoord quotas`: credential management and kafka-acls.sh."""

from __future__ import annotations

import click

from groupcoord.protocol.security.acl import CLUSTER_NAME, OPERATIONS, AclBinding
from groupcoord.protocol.security.credentials import Credentials

from ..client import AdminClient
from .cli_support import CliError, FriendlyGroup, connect_service, print_table


def parse_credentials(value: str | None) -> Credentials | None:
    """--credentials / GROUPCOORD_CREDENTIALS ("User:<name>:<secret>"); CliError that never shows the secret."""
    if not value:
        return None
    try:
        return Credentials.parse(value)
    except ValueError as e:
        raise CliError(str(e)) from None


def admin_client(ctx: click.Context) -> AdminClient:
    """An AdminClient on the running service with the command line's credentials (if any)."""
    return AdminClient(connect_service(ctx.obj["address"], ctx.obj["namespace"]),
                       credentials=ctx.obj.get("credentials"))


# --- principals ---------------------------------------------------------------------------------------


@click.group(cls=FriendlyGroup)
def principals() -> None:
    """Create, list and remove principals (their secrets are shown once, at creation)."""


@principals.command("add")
@click.argument("name")
@click.pass_context
def add_principal(ctx, name: str) -> None:
    """Create principal NAME ("billing" or "User:billing") and print its credentials, once."""
    cred = admin_client(ctx).create_principal(name)
    click.echo(f"created {cred.principal}; its credentials (shown only now):")
    click.echo(f"GROUPCOORD_CREDENTIALS={cred.principal}:{cred.secret}")


@principals.command("list")
@click.pass_context
def list_principals(ctx) -> None:
    """The principals."""
    print_table(None, ["PRINCIPAL"], [[p] for p in admin_client(ctx).list_principals()])


@principals.command("remove")
@click.argument("name")
@click.pass_context
def remove_principal(ctx, name: str) -> None:
    """Remove principal NAME; its credentials stop working within a second."""
    admin_client(ctx).delete_principal(name)
    click.echo(f"removed {name if name.startswith('User:') else 'User:' + name}")


# --- ACLs, as kafka-acls.sh -------------------------------------------------------------------------


def _resource_options(f):
    f = click.option("--group", "groups", multiple=True, help="A GROUP resource (repeatable; '*' for all).")(f)
    f = click.option("--topic", "topics", multiple=True, help="A TOPIC resource (repeatable; '*' for all).")(f)
    f = click.option("--cluster", is_flag=True, help=f"The CLUSTER resource ({CLUSTER_NAME}).")(f)
    return f


def _resources(groups, topics, cluster) -> list[tuple[str, str]]:
    out = [("GROUP", g) for g in groups] + [("TOPIC", t) for t in topics]
    return out + ([("CLUSTER", CLUSTER_NAME)] if cluster else [])


def _bindings(allow, deny, operations, groups, topics, cluster, pattern, host) -> list[AclBinding]:
    resources = _resources(groups, topics, cluster)
    if not resources:
        raise CliError("name a resource: --group, --topic or --cluster")
    if not (allow or deny):
        raise CliError("name a principal: --allow-principal or --deny-principal")
    if not operations:
        raise CliError(f"name an operation: --operation, one of {', '.join(OPERATIONS)}")
    grants = [(p, "ALLOW") for p in allow] + [(p, "DENY") for p in deny]
    return [AclBinding(rtype, name, pattern.upper(), principal, op.upper(), permission, host)
            for rtype, name in resources for principal, permission in grants for op in operations]


def _acl_options(f):
    f = _resource_options(f)
    f = click.option("--allow-principal", "allow", multiple=True, help="e.g. User:billing (repeatable).")(f)
    f = click.option("--deny-principal", "deny", multiple=True, help="e.g. User:intern (repeatable).")(f)
    f = click.option("--operation", "operations", multiple=True,
                     type=click.Choice(OPERATIONS, case_sensitive=False), help="Repeatable.")(f)
    f = click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
                     type=click.Choice(["literal", "prefixed"], case_sensitive=False))(f)
    f = click.option("--host", default="*", show_default=True, help="Only '*' matches callers over Ray.")(f)
    return f


@click.group(cls=FriendlyGroup)
def acls() -> None:
    """Add, list and remove ACLs, with kafka-acls.sh's options."""


@acls.command("add")
@_acl_options
@click.pass_context
def add_acls(ctx, allow, deny, operations, groups, topics, cluster, pattern, host) -> None:
    """Add ACLs: every principal x operation x resource named."""
    bindings = _bindings(allow, deny, operations, groups, topics, cluster, pattern, host)
    admin_client(ctx).create_acls(bindings)
    _print_bindings(f"added {len(bindings)} ACL(s)", bindings)


@acls.command("remove")
@_acl_options
@click.pass_context
def remove_acls(ctx, allow, deny, operations, groups, topics, cluster, pattern, host) -> None:
    """Remove the ACLs named as for `add`."""
    removed = admin_client(ctx).delete_acls(_bindings(allow, deny, operations, groups, topics, cluster, pattern, host))
    click.echo(f"removed {removed} ACL(s)")


@acls.command("list")
@click.option("--principal", default=None, help="Only this principal's ACLs.")
@_resource_options
@click.pass_context
def list_acls(ctx, principal, groups, topics, cluster) -> None:
    """List ACLs (all, or those of a principal and/or resources)."""
    admin = admin_client(ctx)
    resources = _resources(groups, topics, cluster) or [(None, None)]
    found = [b for rtype, name in resources for b in admin.describe_acls(principal, rtype, name)]
    _print_bindings(None, found)


def _print_bindings(title: str | None, bindings: list[AclBinding]) -> None:
    print_table(title, ["PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE-TYPE", "NAME", "PATTERN-TYPE", "HOST"],
                [[b.principal, b.permission, b.operation, b.resource_type, b.resource_name, b.pattern_type, b.host]
                 for b in bindings])


# --- quotas -----------------------------------------------------------------------------------------------


@click.group(cls=FriendlyGroup)
def quotas() -> None:
    """Per-principal request quotas (requests per second), answered with throttle_time_ms."""


@quotas.command("set")
@click.argument("principal")
@click.argument("request_rate", type=click.FloatRange(min=0, min_open=True))
@click.pass_context
def set_quota(ctx, principal: str, request_rate: float) -> None:
    """Set PRINCIPAL's request rate ("User:*": the default of every principal)."""
    admin_client(ctx).alter_client_quota(principal, request_rate)
    click.echo(f"{principal}: {request_rate:g} requests/s")


@quotas.command("remove")
@click.argument("principal")
@click.pass_context
def remove_quota(ctx, principal: str) -> None:
    """Remove PRINCIPAL's request quota."""
    admin_client(ctx).alter_client_quota(principal, None)
    click.echo(f"{principal}: no quota")


@quotas.command("list")
@click.pass_context
def list_quotas(ctx) -> None:
    """Every principal's request quota."""
    print_table(None, ["PRINCIPAL", "REQUESTS/S"], sorted(admin_client(ctx).describe_client_quotas().items()))
