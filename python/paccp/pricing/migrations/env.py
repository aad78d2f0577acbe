"""Alembic environment of the ledger: always run from :meth:`paccp.pricing.ledger.Ledger.migrate`.

The ledger passes the connection it opened (inside its writer transaction, so concurrent openers queue and
one of them migrates); there is no ``alembic.ini`` and no URL here.
"""

from __future__ import annotations

from alembic import context

from paccp.pricing.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
