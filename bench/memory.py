"""The memory model's error on runs with a measured peak, under the name issue 31 gives
the command: ``python bench/memory.py --published`` (``--measured``, or no option for
Megatron's formulas, as well). The checks live in bench/memory_accuracy.py (bench/ was
split by what each script measures); this runs that script as it is, with the same
options, so both names print the same report."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).with_name("memory_accuracy.py")), run_name="__main__")
