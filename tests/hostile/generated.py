"""The hostile cases generated from the command line's argparse definitions (issue 47,
"What to build" 7): every subcommand's options are walked and classified, and each
gets the hostile values of its class, so that a new command or option is covered
without writing a case.

- **file outputs** (an option whose dest is one of :data:`OUTPUT_DESTS`, or whose
  metavar names a file it writes): a device, a FIFO, a socket, a symbolic link loop, a
  symbolic link to a file outside its folder, an existing file (no ``--overwrite``), a
  read-only file (even with ``--overwrite``), a file in a read-only folder, in a missing
  folder, a folder, a name holding a NUL byte, and the command's own input file
  (directly, through ``..``, through a symbolic link, through a hard link; with
  ``--overwrite`` too);
- **folder outputs** (metavar ``DIR``): a file, a device, a FIFO, a folder that holds
  files (no ``--overwrite``), the command's own input;
- **inputs** (:data:`INPUT_DESTS`): a FIFO, ``/dev/zero``, a folder, a binary file, a
  file larger than any input (sparse), a missing file, a link loop, a NUL byte;
- **typed options** (an argparse ``type=``, ``choices=``): every value of
  :data:`BAD_VALUES` that the option's own type refuses, and an unknown choice;
- **script text** (options of ``slurm`` that reach the script): a newline, a NUL, an
  escape character.

Every generated case must end with status 2 and one line ``starchol CMD: error: ...``,
leave the inputs' folder unchanged and the case's folder empty
(:func:`tests.hostile.test_generated.check_case`). ``{d}``: the inputs' folder, ``{t}``:
the case's folder.
"""
import os
import stat

#: dests of options that name a file or folder the command writes
OUTPUT_DESTS = ("out", "output", "json", "gantt", "png", "chameleon", "trace", "gather",
                "solution")
#: dests of options that name a file the command reads
INPUT_DESTS = ("input", "rhs", "map_file", "node", "runs")
#: (command, dest) pairs that name paths used later by a job, not written or read by the
#: command itself (``slurm --output``: the job's factor): given the script-text cases
JOB_PATHS = {("slurm", "output"), ("slurm", "json_dir"), ("slurm", "perf_model_dir"),
             ("slurm", "starchol")}

#: a fast, valid command line of each command (``{t}``: the case's folder); a command
#: not listed gets its required options filled in (:func:`base_argv`)
BASE = {
    "map": ["--dist", "sbc", "--nodes", "3", "--nt", "6"],
    "volume": ["--dist", "sbc", "--nodes", "3", "--nt", "6"],
    "compare": ["--nodes", "3", "--nt", "6"],
    "plan": ["--nodes", "4", "--n", "1000", "--nb", "100", "--memory-per-node", "64e9"],
    "run": ["--dist", "2dbc", "--nb", "32", "--n", "64"],
    "bench": ["--n", "64", "--nb", "32"],
    "report": ["--model", "--nodes-range", "2..4", "--n", "1000", "--nb", "100", "-o",
               "{t}/r"],
    "generate": ["--n", "8", "--output", "{t}/g.h5:/A"],
    "slurm": ["--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "100"],
    "info": [],
    "simulate": ["--dist", "sbc", "--nodes", "3", "--nt", "6", "--node-gflops", "10",
                 "--cores", "2"],
    "calibrate": ["--nb", "64", "--method", "fork", "--workers", "1", "-o", "{t}/c.json"],
}

#: the command line that makes an input option count, ``{v}`` its value (default: the
#: base command line and the option)
INPUT_CONTEXT = {
    ("map", "map_file"): ["--dist", "custom", "--map-file", "{v}", "--nt", "4"],
    ("volume", "map_file"): ["--dist", "custom", "--map-file", "{v}", "--nt", "4"],
    ("simulate", "map_file"): ["--dist", "custom", "--map-file", "{v}", "--nt", "4",
                               "--node-gflops", "10", "--cores", "2"],
    ("run", "map_file"): ["--dist", "custom", "--map-file", "{v}", "--n", "64", "--nb",
                          "32"],
    ("slurm", "map_file"): ["--dist", "custom", "--map-file", "{v}", "--n", "1000", "--nb",
                            "100"],
    ("run", "input"): ["--dist", "2dbc", "--nb", "32", "--input", "{v}:/A"],
    ("run", "rhs"): ["--dist", "2dbc", "--nb", "32", "--input", "{d}/good.h5:/A", "--rhs",
                     "{v}:/B"],
    ("slurm", "input"): ["--dist", "sbc", "--nodes", "6", "--nb", "100", "--input",
                         "{v}:/A"],
    ("plan", "node"): BASE["plan"] + ["--simulate", "--node", "{v}"],
    ("simulate", "node"): ["--dist", "sbc", "--nodes", "3", "--nt", "6", "--node", "{v}"],
    ("report", "node"): ["--simulate", "--nodes-range", "2..3", "--n", "1000", "--nb",
                         "100", "--bandwidth", "10Gbit", "--node", "{v}", "-o", "{t}/r"],
    ("report", "runs"): ["{v}", "-o", "{t}/r"],
}

#: the good file of each input option (in the inputs' folder), for the outputs' "own
#: input" cases
GOOD_INPUT = {"input": "good.h5", "rhs": "good.h5", "map_file": "map.txt",
              "node": "node.json"}

#: hostile targets of a file output: (id, path, extra words)
FILE_TARGETS = [
    ("device", "/dev/null", []), ("mknod", "{d}/null", []), ("fifo", "{d}/fifo", []),
    ("socket", "{d}/sock", []), ("link loop", "{d}/loop1", []),
    ("link out of its folder", "{d}/sub/outlink", []),
    ("link out, overwrite", "{d}/sub/outlink", ["--overwrite"]),
    ("existing file", "{d}/exists.json", []),
    ("read-only file, overwrite", "{d}/readonly.json", ["--overwrite"]),
    ("read-only folder", "{d}/ro/new.out", []), ("missing folder", "{t}/no/such/x.out", []),
    ("folder", "{d}/folder", []), ("NUL byte", "{t}/a\0b", []),
]
#: hostile targets of a folder output
FOLDER_TARGETS = [
    ("a file", "{d}/exists.json", []), ("device", "/dev/null", []),
    ("fifo", "{d}/fifo", []), ("holds files", "{d}/full", []),
    ("NUL byte", "{t}/a\0b", []),
]
#: hostile sources of an input
INPUT_SOURCES = [
    ("fifo", "{d}/fifo"), ("dev-zero", "/dev/zero"), ("folder", "{d}/folder"),
    ("binary", "{d}/binary.bin"), ("huge", "{d}/huge.bin"), ("missing", "{d}/none.x"),
    ("link loop", "{d}/loop1"), ("NUL byte", "{d}/a\0b"), ("socket", "{d}/sock"),
]
#: (command, dest) -> input sources accepted there: ``slurm --input`` names a file of
#: the cluster, perhaps absent here (a warning, docs/slurm.md)
INPUT_ACCEPTED = {("slurm", "input"): {"missing"}}
#: values tried on every typed option: those its own type refuses are cases
BAD_VALUES = ["abc", "1.5", "", "-1", "0x10", "1e3", " ", str(2 ** 64), "nan", "-0"]
#: characters that may not reach a script (``slurm``)
SCRIPT_TEXT = [("newline", "a\nb"), ("NUL", "a\0b"), ("escape", "a\x1bb"),
               ("carriage return", "a\rb")]


def make_generated_inputs(d):
    """The extra files of the generated cases in the inputs' folder ``d`` (beside
    :func:`tests.hostile.data.make_inputs`'s)."""
    import json

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "examples", "nodes",
                           "this-machine-2core.json")) as fh:
        node = json.load(fh)
    with open(f"{d}/node.json", "w") as fh:
        json.dump(node, fh)
    with open(f"{d}/map.txt", "w") as fh:
        fh.write("2 2\n0 1\n1 0\n")
    os.makedirs(f"{d}/sub", exist_ok=True)
    os.symlink("../exists.json", f"{d}/sub/outlink")
    os.mkdir(f"{d}/ro")
    os.chmod(f"{d}/ro", 0o555)
    os.mkdir(f"{d}/full")
    with open(f"{d}/full/mine.txt", "w") as fh:
        fh.write("the user's file\n")
    with open(f"{d}/binary.bin", "wb") as fh:
        fh.write(bytes(range(256)) * 64)
    with open(f"{d}/huge.bin", "wb") as fh:
        fh.truncate(100 * 2 ** 20)            # sparse: larger than any input starchol reads
    for name in set(GOOD_INPUT.values()):
        os.symlink(name, f"{d}/inlink-{name}")
        os.link(f"{d}/{name}", f"{d}/hard-{name}")


def _flag(action):
    longs = [o for o in action.option_strings if o.startswith("--")]
    return (longs or action.option_strings or [action.dest])[0]


def _is_folder(action):
    return "DIR" in str(action.metavar or "")


def _is_h5(action):
    return ":/" in str(action.metavar or "")


def subcommands(parser):
    """``{name: parser}`` of the top-level parser's subcommands."""
    return dict(getattr(parser, "command_parsers", {}) or {
        name: p for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"
        for name, p in a.choices.items()})


def base_argv(name, sub):
    """A valid command line of ``name``: :data:`BASE`, else its required options filled
    (an output with a name in the case's folder, a number 1, a choice its first)."""
    if name in BASE:
        return list(BASE[name])
    out = []
    for a in sub._actions:
        if not a.required or not a.option_strings:
            continue
        if a.choices:
            value = str(list(a.choices)[0])
        elif a.dest in OUTPUT_DESTS:
            value = "{t}/base.out"
        elif a.type is not None and a.type is not str:
            value = "1"
        else:
            value = "x"
        out += [_flag(a), value]
    return out


def without(argv, action):
    """``argv`` less the option ``action`` and its value (a positional is left)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in action.option_strings:
            skip = action.nargs != 0
            continue
        out.append(word)
    return out


def classify(name, sub):
    """``(file outputs, folder outputs, inputs, typed, texts)``: the actions of the
    subcommand ``name`` by class (see the module doc)."""
    outs, folders, ins, typed, texts = [], [], [], [], []
    for a in sub._actions:
        if a.dest in ("help", "verbose", "version") or a.nargs == 0:
            continue
        if (name, a.dest) in JOB_PATHS:
            texts.append(a)
        elif a.dest in OUTPUT_DESTS:
            (folders if _is_folder(a) or (name == "report" and a.dest == "output")
             else outs).append(a)
        elif a.dest in INPUT_DESTS:
            ins.append(a)
        elif a.choices or (a.type is not None and a.type is not str):
            typed.append(a)
        elif name == "slurm" and a.option_strings:
            texts.append(a)
    return outs, folders, ins, typed, texts


def _value(action, path):
    return path + (":/L" if _is_h5(action) else "")


def generate_cases(parser):
    """Every generated case of ``parser``'s subcommands: ``(id, argv, words)`` with
    ``words`` expected in the one error line (None: any). Status 2 for all."""
    cases = []
    for name, sub in sorted(subcommands(parser).items()):
        base = base_argv(name, sub)
        outs, folders, ins, typed, texts = classify(name, sub)
        has_overwrite = any(a.dest == "overwrite" for a in sub._actions)
        for a in outs:
            rest = without(base, a)
            flag = _flag(a)
            for tid, path, extra in FILE_TARGETS:
                if extra and not has_overwrite:
                    continue
                cases.append((f"{name} {flag} {tid}", [name, *rest, flag,
                                                       _value(a, path), *extra], None))
            for i in ins:
                good = GOOD_INPUT.get(i.dest)
                if good is None:
                    continue
                ctx = INPUT_CONTEXT.get((name, i.dest))
                args = ([w.replace("{v}", "{d}/" + good) for w in ctx] if ctx else
                        [*base, _flag(i), "{d}/" + good])
                args = without(args, a)
                for how, path in (("", good), (" via ..", f"folder/../{good}"),
                                  (" via a link", f"inlink-{good}"),
                                  (" via a hard link", f"hard-{good}")):
                    over = ["--overwrite"] if has_overwrite else []
                    cases.append((f"{name} {flag} is its {_flag(i)}{how}",
                                  [name, *args, flag, _value(a, "{d}/" + path), *over],
                                  None))
        for a in folders:
            rest = without(base, a)
            flag = _flag(a)
            for tid, path, extra in FOLDER_TARGETS:
                cases.append((f"{name} {flag} {tid}", [name, *rest, flag, path, *extra],
                              None))
        for a in ins:
            ctx = INPUT_CONTEXT.get((name, a.dest))
            for sid, path in INPUT_SOURCES:
                if sid in INPUT_ACCEPTED.get((name, a.dest), ()):
                    continue
                if ctx:
                    argv = [w.replace("{v}", path) for w in ctx]
                else:
                    argv = [*without(base, a), _flag(a),
                            path + (":/A" if _is_h5(a) else "")]
                cases.append((f"{name} {_flag(a)} {sid}", [name, *argv], None))
        for a in typed:
            rest = without(base, a)
            flag = _flag(a)
            if a.choices:
                cases.append((f"{name} {flag} unknown choice",
                              [name, *rest, flag, "no-such-choice"], "invalid choice"))
            if a.type is None or a.type is str:
                continue
            for value in BAD_VALUES:
                try:
                    a.type(value)
                except Exception:  # noqa: BLE001 - refused by the option's own type
                    cases.append((f"{name} {flag} {value!r}", [name, *rest, flag, value],
                                  "argument " + "/".join(a.option_strings)))
        for a in texts:
            rest = without(base, a)
            flag = _flag(a)
            for tid, text in SCRIPT_TEXT:
                cases.append((f"{name} {flag} {tid}", [name, *rest, flag, text], None))
    return cases


def case_paths_ok(d):
    """The inputs' folder keeps its modes (the read-only folder stays read-only)."""
    return not os.stat(f"{d}/ro").st_mode & stat.S_IWUSR
