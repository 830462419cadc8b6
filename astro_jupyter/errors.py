"""One exception hierarchy with a single root; foreign errors are converted where they enter.

    AstroError
    ├── ConfigError            missing or invalid configuration (e.g. no LLM endpoint)
    ├── StoreError             the database refused (driver errors mapped at the store boundary)
    │   ├── StoreLockedError   another process holds the write lock past the busy timeout
    │   └── StoreReadOnlyError the file or directory is not writable
    ├── LlmError               the LLM endpoint failed after retries
    │   └── LlmUnavailableError  not configured or not reachable
    ├── ServiceError           an external service (ADS, arXiv, Sesame, a download) failed
    │   ├── NotFoundError      the thing asked for does not exist there
    │   ├── ServiceTimeoutError
    │   └── NotebookError      a notebook that cannot be read, changed or run as asked
    ├── ToolInputError         arguments that do not fit a tool's schema
    ├── PermissionDenied       the permission pipeline said no
    ├── RunNotFound / SessionNotFound
    ├── RunConflict            a second run started while one is active in the session
    └── QuestionCancelled      the run was cancelled while a question waited for its answer

Services raise these; handlers map them to HTTP statuses in one place, tools turn them
into error results the model can read.
"""

from __future__ import annotations


class AstroError(Exception):
    """Root of every error astro-jupyter raises on purpose."""

    reason: str = "error"


class ConfigError(AstroError):
    reason = "config"


class StoreError(AstroError):
    reason = "store"


class StoreLockedError(StoreError):
    reason = "store_locked"


class StoreReadOnlyError(StoreError):
    reason = "store_read_only"


class LlmError(AstroError):
    reason = "llm"


class LlmUnavailableError(LlmError):
    reason = "llm_unavailable"


class ServiceError(AstroError):
    reason = "service"


class NotFoundError(ServiceError):
    reason = "not_found"


class ServiceTimeoutError(ServiceError):
    reason = "timeout"


class NotebookError(ServiceError):
    reason = "notebook"


class ToolInputError(AstroError):
    reason = "invalid_arguments"


class PermissionDenied(AstroError):
    reason = "permission_denied"


class RunNotFound(AstroError):
    reason = "run_not_found"


class SessionNotFound(AstroError):
    reason = "session_not_found"


class RunConflict(AstroError):
    reason = "run_conflict"


class QuestionCancelled(AstroError):
    reason = "cancelled"


class InvalidRequest(AstroError):
    """The request is well-formed HTTP but asks for something that cannot be (400 unless ``status``)."""

    reason = "invalid_request"

    def __init__(self, message: str, *, reason: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        if reason:
            self.reason = reason
        self.status = status


class NotAvailable(AstroError):
    """A feature whose module is not installed/landed yet (501)."""

    reason = "not_implemented"


class RateLimited(AstroError):
    reason = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
