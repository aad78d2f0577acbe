"""Pricing and billing: price books, quotes, usage ingestion, the ledger, invoices."""
