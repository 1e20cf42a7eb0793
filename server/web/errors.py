"""JSON errors everywhere: no HTML error pages, no stack traces sent to clients."""

from __future__ import annotations

import logging
import math

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException, InternalServerError

from kernelscope.server.store.rows import StoreUnavailable

log = logging.getLogger(__name__)
STORE_RETRY_S = 10.0


class ApiError(Exception):
    """An error a view raises to answer `{"error": message}` with `status`."""

    def __init__(self, message: str, status: int = 400, retry_after_s: float | None = None
                 ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s


def error_response(message: str, status: int, retry_after_s: float | None = None
                   ) -> tuple[Response, int]:
    response = jsonify({"error": message, "status": status})
    if retry_after_s is not None:
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
    return response, status


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> tuple[Response, int]:
        return error_response(exc.message, exc.status, exc.retry_after_s)

    @app.errorhandler(StoreUnavailable)
    def store_unavailable(exc: StoreUnavailable) -> tuple[Response, int]:
        log.warning("trace store unavailable: %s", exc)
        return error_response("the trace database is unavailable; try again shortly", 503,
                              STORE_RETRY_S)

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
