"""The errors the emulated service answers with: one class per AWS error code, in the JSON 1.1 error shape.

Raising a class (``raise ResourceInUse(...)``) rather than a code string keeps a typo in a code from
reaching a client, and lets the protocol layer answer every one of them the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar


def shorten(text: str, limit: int = 80) -> str:
    """A client's value in a reply or log: enough to recognise it, never all of an oversized one."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ServiceError(Exception):
    """An error the service answers with; ``code`` is the ``__type`` a client's botocore reads."""

    code: ClassVar[str] = "InternalFailure"
    status: ClassVar[int] = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"__type": self.code, "message": self.message}


class ValidationException(ServiceError):
    code = "ValidationException"


class SerializationException(ServiceError):
    code = "SerializationException"


class UnknownOperationException(ServiceError):
    code = "UnknownOperationException"


class ResourceInUse(ServiceError):
    code = "ResourceInUse"


class ResourceNotFound(ServiceError):
    code = "ResourceNotFound"


class ResourceLimitExceeded(ServiceError):
    code = "ResourceLimitExceeded"


class AccessDeniedException(ServiceError):
    code = "AccessDeniedException"


class ThrottlingException(ServiceError):
    code = "ThrottlingException"

    def __init__(self, message: str = "Rate exceeded") -> None:
        super().__init__(message)


class InternalFailure(ServiceError):
    code = "InternalFailure"
    status = 500

    def __init__(self, message: str = "We encountered an internal error. Please try again.") -> None:
        super().__init__(message)
