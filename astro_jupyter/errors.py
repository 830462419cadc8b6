"""One exception hierarchy with a single root; foreign errors are converted where they enter.

    AstroError
    ├── ConfigError            missing or invalid configuration (e.g. no LLM endpoint)
    │   ├── mcp.client.McpConfigError (also a ValueError)  an MCP server entry that cannot be used
    │   └── mcp.server.McpServeError  astro-jupyter mcp cannot serve as asked (e.g. a non-loopback address)
    ├── StoreError             the database refused (driver errors mapped at the store boundary)
    │   ├── StoreLockedError   another process holds the write lock past the busy timeout
    │   └── StoreReadOnlyError the file or directory is not writable
    ├── LlmError               the LLM endpoint failed after retries
    │   ├── LlmUnavailableError  not configured or not reachable
    │   ├── LlmAuthError       the endpoint rejected the key (401/403)
    │   └── UnknownModelError  the endpoint does not serve the model (404)
    ├── ServiceError           an external service (ADS, arXiv, Sesame, a download) failed
    │   ├── NotFoundError      the thing asked for does not exist there
    │   ├── ServiceTimeoutError
    │   │   └── llm.client.DeadlineExceeded     one LLM request past its overall deadline
    │   ├── NotebookError      a notebook that cannot be read, changed or run as asked
    │   │   └── CellChanged    the cell is not the code the user allowed (not run; ask again)
    │   ├── services.download._ChannelError     one download channel failed (the next is tried)
    │   ├── mcp.client.ServerUnavailable        an MCP server could not be started, listed or reached
    │   └── services.rag._OutOfTime (a ServiceTimeoutError)  rag_search's time budget ran out (keeps what it found)
    ├── ToolInputError         arguments that do not fit a tool's schema
    ├── kernel.inspect.NotEvaluated  a kernel attribute whose value would come from the user's code
    ├── wire_contract.UnsupportedAnnotation (also a TypeError)  an event field type the wire contract cannot express
    ├── InvalidInput (also a ValueError)   text from a user or the model that cannot be used;
    │   │                                   the message is written for whoever sent it
    │   ├── services.identifiers.IdentifierError     not an arXiv id, DOI, bibcode, URL
    │   ├── cells.parsing.ArgumentSyntaxError        ``%astro`` arguments that do not parse
    │   ├── agent.validation.ArgumentError           a tool call's arguments
    │   ├── agent.tools.filesystem.security.PathNotAllowed   (PathProtected) the sandbox refuses
    │   ├── agent.tools.todo.TodoError / agent.subagents.SubagentLimitError
    │   ├── agent.background.BackgroundError
    │   ├── llm.shape.MalformedChunk                 a stream chunk outside the wire format
    │   └── store.history.InvalidCursor              a cursor this search did not hand out
    ├── FileRefused (also an OSError)   a file the tools will not read
    │   └── agent.tools.filesystem.regular.NotRegularFile / FileTooLarge
    ├── PermissionDenied       the permission pipeline said no
    │   └── app.models.ModelNotAllowed   a model outside the administrator's allowed_models
    ├── RunNotFound / SessionNotFound
    ├── RunConflict            a second run started while one is active in the session
    ├── QuestionCancelled      the run was cancelled while a question waited for its answer
    ├── QuestionUnanswered     no one answered a question (no one there, no input, the wait ran out)
    ├── RunInterrupted         the user interrupted the kernel while a call waited
    ├── NotOpen                the sidebar does not have that notebook open (the server acts itself)
    ├── InvalidRequest         a request that asks for something that cannot be (400 unless ``status``)
    ├── NotAvailable           a feature whose module is not installed (501)
    └── RateLimited            too many requests; ``retry_after`` seconds
        └── app.runs.TooManyRuns   a user past max_runs_per_user runs at once

Exceptions that stay in their own module subclass one of these; the builtin bases
(ValueError, OSError) are kept so existing ``except ValueError`` code sees no change.
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


class LlmAuthError(LlmError):
    """Retrying cannot help: the key has to change (the sidebar says to set it, with no "Try again")."""

    reason = "auth"


class UnknownModelError(LlmError):
    """The endpoint does not serve this model (the sidebar offers to switch model)."""

    reason = "unknown_model"


class ServiceError(AstroError):
    reason = "service"


class NotFoundError(ServiceError):
    reason = "not_found"


class ServiceTimeoutError(ServiceError):
    reason = "timeout"


class NotebookError(ServiceError):
    reason = "notebook"


class CellChanged(NotebookError):
    """A notebook cell no longer holds the code the user was shown and allowed, so it was not run."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


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


class QuestionUnanswered(AstroError):
    """No one answered (a front end with no one at it, no input, buttons withdrawn): not the user's "deny".
    ``str(exc)`` says why, for the run's record and the model."""

    reason = "unanswered"


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


class InvalidInput(AstroError, ValueError):
    """Input from a user or the model that cannot be used; ``str(exc)`` is for whoever sent it."""

    reason = "invalid_input"


class FileRefused(AstroError, OSError):
    """A file the tools will not read (not a regular file, too large)."""

    reason = "file_refused"


class RunInterrupted(AstroError):
    """The user interrupted the kernel while a call was waiting; the work was cancelled."""

    reason = "interrupted"


class NotOpen(AstroError):
    """The sidebar does not have this notebook open: the server acts on it itself."""

    reason = "not_open"
