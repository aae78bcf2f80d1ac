"""One exception type for bad input: the CLI prints its message as one line and exits non-zero."""


class InputError(Exception):
    """Bad input or an unusable resource. The message names the file, the line or record, and the problem."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
