"""An app whose import takes `IMPORT_SECONDS`: a child importing it says it is
ready that long after it started, at the earliest."""

import time

from ductline import Pipeline

IMPORT_SECONDS = 0.5

time.sleep(IMPORT_SECONDS)


def echo(x):
    return x


slow_import = Pipeline("slow_import").start(echo)
