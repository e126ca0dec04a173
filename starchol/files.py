"""Files: the public front of starchol's file handling, one module a job:

- :mod:`starchol.paths`: naming files, links, ``FILE.h5:/dataset`` targets;
- :mod:`starchol.inputs`: the one readable-input check;
- :mod:`starchol.outputs`: the one output check and disk space;
- :mod:`starchol.writes`: atomic writes, output folders, publishing a result.

Callers import the names from here.
"""
from .paths import (  # noqa: F401
    parse_target,
    resolve,
    identity,
    fingerprint,
    same_file,
    check_distinct,
    read_only,
    special_kind,
    check_printable)
from .inputs import (  # noqa: F401
    check_readable_file,
    MAX_TEXT_INPUT_BYTES,
    read_text_input,
    MAX_JSON_DEPTH,
    read_json_input)
from .outputs import (  # noqa: F401
    check_regular_output,
    check_folder_writable,
    check_output,
    check_outputs,
    free_bytes,
    check_disk_space,
    check_hdf5_output_space)
from .writes import (  # noqa: F401
    new_temporary,
    keep_mode,
    drop_temporary,
    DISK_FULL,
    disk_full,
    naming_full_disk,
    atomic_path,
    write_atomic,
    OutputFolder,
    OutputAppeared,
    publish,
    publish_text)
