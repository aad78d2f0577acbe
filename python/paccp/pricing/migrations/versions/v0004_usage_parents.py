"""PostgreSQL: usage's parents (tenant, ingest batch) checked once per statement instead of once per row.

Revision ID: 0004
Revises: 0003

The two foreign keys of ``usage`` (``tenant`` -> ``tenant.name``, ``batch_id`` -> ``ingest_batch.id``) are
each a per-row trigger on PostgreSQL (a ``SELECT ... FOR KEY SHARE`` of the parent per inserted row): about
2/3 of the server's CPU time of a bulk ingest (``docs/pricing.md``, Scale). This revision replaces them, on
PostgreSQL only, with the same rule written set-wise; SQLite keeps its declared foreign keys.

Child side, ``usage_parents`` (AFTER INSERT, FOR EACH STATEMENT, the inserted rows as a transition table):
the distinct tenants and batch ids of the statement's rows are locked ``FOR KEY SHARE`` in one query each,
as the foreign keys locked them row by row (a concurrent DELETE of a parent waits for this transaction, and
one that committed first makes the lock find nothing), then any of them that does not exist fails the
statement with SQLSTATE 23503 (foreign_key_violation). The function is SECURITY DEFINER: ``FOR KEY SHARE``
needs UPDATE on the parent, which the ingest and controller roles do not have (the built-in foreign keys
run their checks as the table owner the same way); its tables are schema-qualified and its search_path is
``pg_catalog, pg_temp``, so no object of the caller's can stand in for a parent.

Parent side (what ON DELETE/UPDATE NO ACTION did): ``tenant_usage_ref`` and ``ingest_batch_usage_ref``
(BEFORE DELETE OR UPDATE, FOR EACH ROW) refuse to delete a parent, or change its key, while a usage row
refers to it; ``tenant_usage_truncate`` and ``ingest_batch_usage_truncate`` (BEFORE TRUNCATE) refuse to
truncate either table while ``usage`` has rows. A BEFORE ROW trigger runs after the row is locked, so a
DELETE racing an ingest that locked the parent waits for it and then sees its rows.

The SQL is written out here as it is at this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: (column of usage, parent table, parent key, trigger name prefix)
PARENTS = (("tenant", "tenant", "name"), ("batch_id", "ingest_batch", "id"))


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def pg_sql(schema: str) -> list[str]:
    """The functions and triggers of this revision for the ledger in ``schema``."""
    s = _ident(schema)
    checks = []
    for col, parent, key in PARENTS:
        checks.append(
            f"  PERFORM 1 FROM {s}.{parent} p WHERE p.{key} IN (SELECT DISTINCT n.{col} FROM new_rows n)"
            f" FOR KEY SHARE OF p;\n"
            f"  SELECT n.{col}::text INTO missing FROM (SELECT DISTINCT {col} FROM new_rows) n\n"
            f"    WHERE NOT EXISTS (SELECT 1 FROM {s}.{parent} p WHERE p.{key} = n.{col}) LIMIT 1;\n"
            f"  IF FOUND THEN\n"
            f"    RAISE EXCEPTION 'insert into usage: {col} % is not in {parent}', missing\n"
            f"      USING ERRCODE = 'foreign_key_violation';\n"
            f"  END IF;\n"
        )
    out = [
        f"CREATE FUNCTION {s}.paccp_usage_parents() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER"
        f" SET search_path = pg_catalog, pg_temp AS $$\nDECLARE missing text;\nBEGIN\n{''.join(checks)}"
        f"  RETURN NULL;\nEND $$",
        f"REVOKE ALL ON FUNCTION {s}.paccp_usage_parents() FROM PUBLIC",
        f"CREATE TRIGGER usage_parents AFTER INSERT ON {s}.usage REFERENCING NEW TABLE AS new_rows"
        f" FOR EACH STATEMENT EXECUTE FUNCTION {s}.paccp_usage_parents()",
        # parent side: arguments are the parent's key column and usage's column referring to it
        f"CREATE FUNCTION {s}.paccp_usage_ref() RETURNS trigger LANGUAGE plpgsql"
        f" SET search_path = pg_catalog, pg_temp AS $$\n"
        f"DECLARE old_key text := to_jsonb(OLD) ->> TG_ARGV[0]; referred boolean;\nBEGIN\n"
        f"  IF TG_OP = 'UPDATE' AND old_key IS NOT DISTINCT FROM (to_jsonb(NEW) ->> TG_ARGV[0]) THEN\n"
        f"    RETURN NEW;\n  END IF;\n"
        f"  EXECUTE format('SELECT EXISTS (SELECT 1 FROM {s}.usage WHERE %I::text = $1)', TG_ARGV[1])\n"
        f"    INTO referred USING old_key;\n"
        f"  IF referred THEN\n"
        f"    RAISE EXCEPTION '% of %: usage rows refer to % %', TG_OP, TG_TABLE_NAME, TG_ARGV[0], old_key\n"
        f"      USING ERRCODE = 'foreign_key_violation';\n"
        f"  END IF;\n"
        f"  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;\nEND $$",
        f"CREATE FUNCTION {s}.paccp_usage_ref_truncate() RETURNS trigger LANGUAGE plpgsql"
        f" SET search_path = pg_catalog, pg_temp AS $$\nBEGIN\n"
        f"  IF EXISTS (SELECT 1 FROM {s}.usage) THEN\n"
        f"    RAISE EXCEPTION 'TRUNCATE of %: usage rows refer to it', TG_TABLE_NAME"
        f" USING ERRCODE = 'foreign_key_violation';\n"
        f"  END IF;\n  RETURN NULL;\nEND $$",
    ]
    for col, parent, key in PARENTS:
        out.append(
            f"CREATE TRIGGER {parent}_usage_ref BEFORE DELETE OR UPDATE ON {s}.{parent}"
            f" FOR EACH ROW EXECUTE FUNCTION {s}.paccp_usage_ref('{key}', '{col}')"
        )
        out.append(
            f"CREATE TRIGGER {parent}_usage_truncate BEFORE TRUNCATE ON {s}.{parent}"
            f" FOR EACH STATEMENT EXECUTE FUNCTION {s}.paccp_usage_ref_truncate()"
        )
    return out


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return  # SQLite keeps its declared foreign keys (checked row by row at little cost there)
    schema = conn.execute(sa.text("SELECT current_schema()")).scalar_one()
    for fk in sa.inspect(conn).get_foreign_keys("usage", schema=schema):
        conn.exec_driver_sql(f"ALTER TABLE {_ident(schema)}.usage DROP CONSTRAINT {_ident(str(fk['name']))}")
    for stmt in pg_sql(schema):
        conn.execute(sa.text(stmt))  # text(): the '%' of plpgsql is escaped for psycopg


def downgrade() -> None:
    raise NotImplementedError("the ledger is not downgraded")
