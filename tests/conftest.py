"""Test session set-up: no GPU here, so CUDA kernels run in numba's simulator.

The simulator must be switched on before numba.cuda is first imported; on a real GPU machine run
the tests with NUMBA_ENABLE_CUDASIM=0 to check the compiled kernels with the same tests.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# pytest may have imported numba already (the warning filters in pyproject name a numba class)
from numba.core import config as _numba_config  # noqa: E402

_numba_config.reload_config()
