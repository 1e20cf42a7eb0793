"""The permalink store: SQLite (sqlite.py) and PostgreSQL (postgres.py) behind one interface
(rows.py), and the spool that holds traces while the database is down."""
