"""The web tier: the Flask blueprints (api.py, pages.py), event streams, headers, fair shares,
uploads, highlighting, and the gunicorn server it runs under."""
