"""epigemm's exceptions: one class per C status (docs/conventions.md, "Errors")."""

# The C statuses (include/epigemm/epigemm.h, epigemm_status_t).
STATUS_INVALID_VALUE = 1
STATUS_NOT_SUPPORTED = 2
STATUS_INSUFFICIENT_WORKSPACE = 3
STATUS_BACKEND_ERROR = 4
STATUS_OUT_OF_MEMORY = 5
STATUS_INTERNAL_ERROR = 6


class Error(Exception):
    """A call epigemm refused or could not run. `status` is the C status (an int), `message` the
    library's message: it names the argument, the value given and the value expected. No output
    has been written."""

    status = 0

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidValueError(Error, ValueError):
    """A bad argument: shape, dtype, stride, device, overlap, an epilogue's operands."""

    status = STATUS_INVALID_VALUE


class NotSupportedError(Error, NotImplementedError):
    """A valid call that the requested backend (or this build) cannot run."""

    status = STATUS_NOT_SUPPORTED


class InsufficientWorkspaceError(Error):
    """The workspace is smaller than the call needs."""

    status = STATUS_INSUFFICIENT_WORKSPACE


class BackendError(Error, RuntimeError):
    """The BLAS or the CUDA runtime reported a failure."""

    status = STATUS_BACKEND_ERROR


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed."""

    status = STATUS_OUT_OF_MEMORY


class InternalError(Error, RuntimeError):
    """A bug in epigemm."""

    status = STATUS_INTERNAL_ERROR


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidValueError, NotSupportedError, InsufficientWorkspaceError, BackendError,
                OutOfMemoryError, InternalError)
}


def error_for_status(status, message):
    """The exception for a C status and its message."""
    return _BY_STATUS.get(status, Error)(message, status)


def invalid(message):
    """An InvalidValueError raised by the Python layer itself (the C call is not made)."""
    return InvalidValueError(message, STATUS_INVALID_VALUE)
