"""From plan to launch: emit framework settings for a plan, import Megatron-LM commands.

The flag vocabularies are data (designer/data/launch/*.yaml), each with the framework
version it was checked against and where every flag is documented.

May import: catalog/, models/, solvers/ and designer's errors.py and output/; never the
command line, designer/question/ or designer/report/.
"""

from designer.launch.emit import FORMATS, emit
from designer.launch.megatron_import import ImportedRun, load_megatron, parse_megatron
from designer.launch.settings import Launch

__all__ = ["FORMATS", "ImportedRun", "Launch", "emit", "load_megatron", "parse_megatron"]
