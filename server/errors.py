"""JSON errors everywhere: no HTML error pages, no stack traces sent to clients."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException, InternalServerError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error a view raises to answer `{"error": message}` with `status`."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def error_response(message: str, status: int) -> tuple[Response, int]:
    return jsonify({"error": message, "status": status}), status


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> tuple[Response, int]:
        return error_response(exc.message, exc.status)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        return error_response(exc.description or exc.name, status)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> tuple[Response, int]:
        if isinstance(exc, HTTPException):
            return http_error(exc)
        log.exception("unhandled error")
        return error_response(InternalServerError.description, 500)
