"""SQLAlchemy 2 storage: schema, source reads, the results upsert and run bookkeeping."""
