"""Every ``bash`` and ``python`` block of README.md and docs/*.md runs, and says what it prints.

How a block is run (docs/development.md, "The documentation test", says the same for writers):

* A ``bash`` block runs with ``bash`` (``set -eo pipefail``) in a fresh empty directory, with the
  ``compactlog`` beside this test's Python on ``PATH`` (the venv's ``bin``) and no
  ``COMPACTLOG_DATA_DIR``; a ``python`` block runs as a script with this test's Python there.
* The line right above a block may be a marker, ``<!-- docs-test: WORD ... -->``, which GitHub
  does not render. Its words:

  ``continues``      run in the directory of the previous run block of the page, after it
                     (bash variables exported there, such as ``COMPACTLOG_DATA_DIR``, carry over)
  ``output``         on a ``text`` block: the previous run block printed exactly this
                     (trailing blanks of each line ignored); ``tail=N``: its last N lines
  ``broker``         a broker (``BrokerThread``) serves ``data`` in the block's directory first;
                     ``127.0.0.1:9092`` in the block means that broker (a free port really)
  ``spark``/``slow`` the pytest tiers of the same names (every run block is ``slow``: it
                     starts processes and takes seconds)
  ``tier=NAME``      the pytest tier NAME (slow, spark, broker) and nothing else: a block that
                     starts its own broker is ``tier=broker``
  ``needs=EXE,...``  skipped, saying so, where a program EXE is not installed
  ``timeout=S``      seconds the block may take (default 300)
  ``not-run CHECK``  not run here (it runs the whole suite, the main job, a benchmark, a server
                     that never exits, a cluster job, Kafka's own tools): CHECK names the
                     cheaper check below
                     that keeps what it claims true. There is no way to skip a block silently.

* Every ``compactlog`` command line of every ``bash`` block, run or not, is also checked against
  the CLI itself: its subcommands and options must exist (``test_cli_lines_use_real_options``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

import compactlog

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"bash", "python"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
KNOWN_WORDS = {"continues", "output", "broker", "spark", "slow", "not-run"}
KNOWN_KEYS = {"tail", "needs", "timeout", "tier"}
TIERS = {"slow", "spark", "broker"}
DEFAULT_TIMEOUT = 300.0
# What a broker block writes for "the broker": the test swaps in the real address.
DOC_BOOTSTRAP = "127.0.0.1:9092"


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    words: set[str] = field(default_factory=set)
    keys: dict[str, str] = field(default_factory=dict)
    check: str | None = None  # the cheaper check of a not-run block

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.check is None


@dataclass
class Chain:
    """Run blocks that share one directory, in page order, each with its expected output."""

    steps: list[tuple[Block, list[Block]]]

    @property
    def words(self) -> set[str]:
        return set().union(*(block.words for block, _ in self.steps))

    @property
    def tiers(self) -> set[str]:
        words = self.words & TIERS
        return words | {block.keys["tier"] for block, _ in self.steps if "tier" in block.keys}

    @property
    def needs(self) -> set[str]:
        return {
            program
            for block, _ in self.steps
            for program in block.keys.get("needs", "").split(",")
            if program
        }


def parse_marker(text: str, where: str) -> tuple[set[str], dict[str, str], str | None]:
    words: set[str] = set()
    keys: dict[str, str] = {}
    check = None
    tokens = text.split()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if "=" in token:
            key, _, value = token.partition("=")
            assert key in KNOWN_KEYS, f"{where}: unknown docs-test key {key!r}"
            assert key != "tier" or value in TIERS, f"{where}: no tier {value!r}"
            keys[key] = value
        else:
            assert token in KNOWN_WORDS, f"{where}: unknown docs-test word {token!r}"
            words.add(token)
            if token == "not-run":
                assert i + 1 < len(tokens), f"{where}: not-run needs the name of its check"
                check = tokens[i + 1]  # test_blocks_not_run_are_checked knows it
                i += 1
        i += 1
    return words, keys, check


def parse_page(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, language = opening.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{page.name}:{i + 1}: unclosed code block"
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        block = Block(page, i + 1, language, "\n".join(body) + "\n")
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        if marker:
            block.words, block.keys, block.check = parse_marker(marker.group(1), block.where)
        blocks.append(block)
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in parse_page(page)]


def chains_of(blocks: list[Block]) -> list[Chain]:
    chains: list[Chain] = []
    last_page = None
    for block in blocks:
        if block.page != last_page:
            current: Chain | None = None
            last_page = block.page
        if "output" in block.words:
            assert current is not None and current.steps, f"{block.where}: output of no block"
            current.steps[-1][1].append(block)
        elif block.runs:
            if "continues" in block.words:
                assert current is not None, f"{block.where}: continues no block"
                current.steps.append((block, []))
            else:
                current = Chain([(block, [])])
                chains.append(current)
        else:
            assert "continues" not in block.words, f"{block.where}: only run blocks continue"
    return chains


def chain_params() -> Iterator[object]:
    for chain in chains_of(all_blocks()):
        # Each chain starts processes and takes seconds: the slow tier, as the suite defines it.
        tiers = chain.tiers | {"slow"}
        marks = [getattr(pytest.mark, tier) for tier in sorted(tiers)]
        yield pytest.param(chain, id=chain.steps[0][0].where, marks=marks)


# --------------------------------------------------------------------------------------------
# Running blocks


def block_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTLOG_")}
    bindir = Path(sys.executable).parent
    assert (bindir / "compactlog").exists(), f"no compactlog script beside {sys.executable}"
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    # The blocks use the compactlog this test imports (a checkout's src/ or the installed one).
    src = str(Path(compactlog.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def run_block(block: Block, workdir: Path, state: Path, bootstrap: str | None) -> str:
    source = block.source
    if bootstrap is not None:
        source = source.replace(DOC_BOOTSTRAP, bootstrap)
    script = state / f"block-{block.line}.{'sh' if block.language == 'bash' else 'py'}"
    if block.language == "bash":
        env_file = state / "env.sh"
        script.write_text(
            f"if [ -f {env_file} ]; then source {env_file} 2>/dev/null || true; fi\n"
            f"set -eo pipefail\n{source}\nexport -p > {env_file}\n"
        )
        command = ["bash", str(script)]
    else:
        script.write_text(source)
        command = [sys.executable, str(script)]
    timeout = float(block.keys.get("timeout", DEFAULT_TIMEOUT))
    result = subprocess.run(
        command, cwd=workdir, env=block_env(), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"{block.where}: exit code {result.returncode}\n--- block\n{source}--- stdout\n"
        f"{result.stdout[-3000:]}--- stderr\n{result.stderr[-3000:]}"
    )
    return result.stdout


def normalized(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def skip_unless_spark() -> None:
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (pip install compactlog[spark])")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark needs Java 17 or 21")


@pytest.mark.parametrize("chain", list(chain_params()))
def test_block_runs(chain: Chain, tmp_path: Path) -> None:
    for program in sorted(chain.needs):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed")
    if "spark" in chain.tiers:
        skip_unless_spark()
    workdir, state = tmp_path / "work", tmp_path / "state"
    workdir.mkdir()
    state.mkdir()
    brokers = None
    bootstrap = None
    if "broker" in chain.words:
        from tests.broker.helpers.server import Brokers

        brokers = Brokers(workdir / "data")
        bootstrap = brokers.start().bootstrap
    try:
        for block, outputs in chain.steps:
            stdout = run_block(block, workdir, state, bootstrap)
            for expected in outputs:
                want = normalized(expected.source)
                got = normalized(stdout)
                if "tail" in expected.keys:
                    got = got[-int(expected.keys["tail"]) :]
                assert got == want, f"{expected.where}: the output of {block.where} differs"
    finally:
        if brokers is not None:
            brokers.stop_all()


# --------------------------------------------------------------------------------------------
# The cheaper checks of blocks that are not run here


def commands(block: Block) -> list[str]:
    """The block's command lines, comments and continuations folded."""
    text = block.source.replace("\\\n", " ")
    return [" ".join(shlex.split(line, comments=True)) for line in text.splitlines()
            if shlex.split(line, comments=True)]  # fmt: skip


def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def check_top_commands(block: Block) -> None:
    """The README's two commands: the scripts exist, CI runs the test command exactly, and the
    main job the README describes is the one scripts/main.sh runs."""
    assert commands(block) == ["bash scripts/main.sh", "bash scripts/test.sh"]
    ci = [c for c in commands_of_file(ROOT / ".ci" / "run") if not c.startswith(("set ", "cd "))]
    assert ci == ["bash scripts/test.sh"], f".ci/run runs {ci}, not the README's test command"
    main_job = commands_of_file(ROOT / "scripts" / "main.sh")[-1]
    assert main_job.endswith(" $@"), main_job
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert main_job.removesuffix(" $@") in readme, f"the README does not name {main_job}"
    # The figures the README gives for the main job are its defaults.
    from compactlog.spark.pipeline import PipelineSpec

    spec = PipelineSpec("data", "out")
    live = round(spec.keys * (1 - spec.tombstone_fraction))
    records = spec.keys + spec.updates + (spec.keys - live) + live
    for claim in (
        f"{spec.keys:,} tickets of {spec.value_bytes} bytes",
        f"{spec.updates:,} skewed updates",
        f"{spec.tombstone_fraction * 100:g} % of the tickets deleted",
        f"({records:,} records, {spec.partitions} partitions)",
        f"exactly the {live:,} live keys",
        "cleans it on Spark in one pass" if spec.mode == "one-pass" else spec.mode,
    ):
        assert claim in readme, f"the README's main job does not say {claim!r}"
    test_sh = " ".join(commands_of_file(ROOT / "scripts" / "test.sh"))
    for step in ("ruff check", "ruff format --check", "mypy", "lint-imports", '-m "not soak"'):
        assert step in test_sh or step.replace('"', "") in test_sh, f"test.sh does not run {step}"


def commands_of_file(path: Path) -> list[str]:
    return commands(Block(path, 0, "bash", path.read_text()))


def check_install(block: Block) -> None:
    """The extras the install block names exist, and so does the console script."""
    project = pyproject()["project"]
    assert isinstance(project, dict)
    extras = set(project["optional-dependencies"])
    for named in re.findall(r"\.\[([\w,]+)\]", block.source):
        assert set(named.split(",")) <= extras, f"{block.where}: no extra {named}"
    assert "compactlog" in project["scripts"]
    assert (ROOT / "scripts" / "setup-env.sh").is_file()


def check_main_options(block: Block) -> None:
    """``bash scripts/main.sh ARGS``: the ARGS are options of ``compactlog spark pipeline``."""
    for line in commands(block):
        script, _, args = line.partition(" ")
        assert script == "bash" and args.startswith("scripts/main.sh"), line
        problems = cli_problems(["spark", "pipeline", *shlex.split(args)[1:]])
        assert not problems, problems


def check_scripts(block: Block) -> None:
    """Benchmarks and test runs: every ``bash scripts/X`` exists, and so does every path it is
    given (tests/kafka, benchmarks/...); the CLI lines are checked by the CLI test."""
    for line in commands(block):
        words = shlex.split(line)
        if words[:1] == ["bash"]:
            assert (ROOT / words[1]).is_file(), f"{block.where}: no {words[1]}"
            for word in words[2:]:
                if word.startswith(("tests/", "benchmarks/")):
                    assert (ROOT / word.split("::")[0]).exists(), f"{block.where}: no {word}"


def check_cli_options(block: Block) -> None:
    """A server that never exits: its command lines are checked against the CLI (as every
    block's are) and there must be some."""
    assert any(cli_invocations(block.source)), f"{block.where}: no compactlog command to check"


def check_cluster(block: Block) -> None:
    """The spark-submit example: what job.py runs is the CLI's entry point, and the arguments
    given to job.py are the CLI's."""
    assert "from compactlog.cli.main import main" in block.source
    from compactlog.cli.main import main  # noqa: F401 - the import the job makes

    args = block.source.replace("\\\n", " ").split("job.py", 2)[-1]
    problems = cli_problems(shlex.split(args, comments=True))
    assert not problems, problems


def check_kafka_tools(block: Block) -> None:
    """Kafka's own tools (they need Kafka's jars, which only the Kafka tier has): every command
    is one of the tools the Kafka tier runs (tests/kafka/harness.py), by its script name, with
    or without ``.sh``, or kcat; the Kafka tier's tests run the same tools against compactlog."""
    from tests.kafka.harness import TOOLS

    lines = commands(block)
    assert lines, f"{block.where}: no command to check"
    for line in lines:
        program = shlex.split(line)[0].removesuffix(".sh")
        if "=" in program and not program.startswith("-"):  # an assignment, B=127.0.0.1:9093
            continue
        assert program in TOOLS or program in {"kcat", "cat"}, f"{block.where}: {program}?"


def check_jars(block: Block) -> None:
    """A Spark example that needs JVM jars from Maven Central (Spark's Kafka connector, an S3
    server): every ``.jars/NAME`` it names (``format("kafka")`` names spark-kafka) has its
    ``tests/jars/NAME/pom.xml``, which setup-env fetches, and a test uses those jars: the tests
    run what the example shows."""
    names = set(re.findall(r"\.jars/([\w.-]+)", block.source))
    if 'format("kafka")' in block.source:
        names.add("spark-kafka")
    assert names, f"{block.where}: names no .jars/ directory"
    tests = [t.read_text() for t in (ROOT / "tests").rglob("*.py")]
    for name in names:
        assert (ROOT / "tests" / "jars" / name / "pom.xml").is_file(), f"{block.where}: {name}?"
        used = any(f"jars/{name}" in t or f'"{name}"' in t for t in tests)
        assert used, f"{block.where}: no test uses .jars/{name}"


def check_remote_fs(block: Block) -> None:
    """Reading from an object store: the storage options the example gives are the reader's,
    its locations use schemes the reader knows, and what it imports exists."""
    from compactlog.spark.remote_fs import FS_OPTIONS, SCHEMES

    for name in re.findall(r'"(fs\.[\w.]+)"', block.source):
        assert name in FS_OPTIONS, f"{block.where}: no storage option {name}"
    for scheme in re.findall(r'"(\w+)://', block.source):
        assert scheme in SCHEMES or scheme in {"http", "https"}, f"{block.where}: {scheme}://?"
    for module, names in re.findall(r"^from (compactlog[\w.]*) import (.+)$", block.source, re.M):
        imported = __import__(module, fromlist=["_"])
        for name in names.split(","):
            assert hasattr(imported, name.strip()), f"{block.where}: no {module}.{name.strip()}"


def check_commands(block: Block) -> None:
    """Benchmarks and test runs given with ``python``: the files exist, each ``--option`` given
    to a benchmark is in its ``--help``, and each ``-m`` marker of pytest is declared."""
    markers = {m.split(":")[0] for m in pyproject()["tool"]["pytest"]["ini_options"]["markers"]}  # type: ignore[index]
    lines = commands(block)
    assert lines, f"{block.where}: no command to check"
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "python", f"{block.where}: {line}"
        paths = [w for w in words if w.startswith(("tests/", "benchmarks/"))]
        for path in paths:
            assert (ROOT / path.split("::")[0]).exists(), f"{block.where}: no {path}"
        if words[1:3] == ["-m", "pytest"]:
            for i, word in enumerate(words):
                if word == "-m" and words[i + 1] != "pytest":
                    assert set(re.findall(r"\w+", words[i + 1])) - {"not", "and", "or"} <= markers
            continue
        [bench] = paths
        shown = subprocess.run(
            [sys.executable, str(ROOT / bench), "--help"], capture_output=True, text=True,
            cwd=ROOT, check=True, timeout=120,
        ).stdout  # fmt: skip
        for option in (w.split("=")[0] for w in words if w.startswith("--")):
            assert option in shown, f"{block.where}: {bench} has no {option}"


CHECKS: dict[str, Callable[[Block], None]] = {
    "jars": check_jars,
    "remote-fs": check_remote_fs,
    "commands": check_commands,
    "kafka-tools": check_kafka_tools,
    "top-commands": check_top_commands,
    "install": check_install,
    "main-options": check_main_options,
    "scripts": check_scripts,
    "cli-options": check_cli_options,
    "cluster": check_cluster,
}


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.where) for b in all_blocks() if b.check is not None]
)
def test_blocks_not_run_are_checked(block: Block) -> None:
    assert block.check in CHECKS, f"{block.where}: not-run names no known check {block.check!r}"
    CHECKS[block.check](block)


# --------------------------------------------------------------------------------------------
# Every compactlog command line names real commands and options


def cli_invocations(source: str) -> Iterator[list[str]]:
    """The arguments of every ``compactlog`` command in a bash block."""
    for line in source.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:  # a quote spanning lines (a heredoc's text): not a command line
            continue
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set("|&;<>()"):
                if "compactlog" in segment:
                    yield segment[segment.index("compactlog") + 1 :]
                segment = []
            else:
                segment.append(token)


def cli_problems(args: list[str]) -> list[str]:
    from compactlog.cli.main import hoist_global_options, main

    args = hoist_global_options(args)  # --data-dir and --bootstrap-server may follow the command
    command: click.Command = main
    path = ["compactlog"]
    problems = []
    i = 0
    options_end = False
    while i < len(args):
        token = args[i]
        if token == "--":
            options_end = True
        elif token.startswith("-") and len(token) > 1 and not options_end:
            name = token.split("=", 1)[0]
            if not name.startswith("--"):
                name = name[:2]  # -p0
            option = next(
                (p for p in command.params if isinstance(p, click.Option)
                 and name in (*p.opts, *p.secondary_opts)),
                None,
            )  # fmt: skip
            if option is None and name != "--help":
                problems.append(f"{' '.join(path)} has no option {name}")
            elif option is not None and not (option.is_flag or option.count) and token == name:
                i += 1  # its value
        elif isinstance(command, click.Group):
            sub = command.commands.get(token)
            if sub is None:
                problems.append(f"{' '.join(path)} has no command {token!r}")
                break
            command = sub
            path.append(token)
        i += 1
    return problems


def test_cli_lines_use_real_options() -> None:
    problems = []
    for block in all_blocks():
        if block.language == "bash":
            for args in cli_invocations(block.source):
                problems += [f"{block.where}: {p}" for p in cli_problems(args)]
    assert not problems, "\n".join(problems)


def test_python_blocks_compile() -> None:
    for block in all_blocks():
        if block.language == "python":
            compile(block.source, block.where, "exec")


def test_the_checker_catches_a_wrong_option() -> None:
    """The CLI check could fail: an unknown option, command or group member is reported."""
    bad = "compactlog --data-dir d topics create t --partitons 2 | compactlog nope\n"
    found = [cli_problems(args) for args in cli_invocations(bad)]
    assert found == [
        ["compactlog topics create has no option --partitons"],
        ["compactlog has no command 'nope'"],
    ]
    assert cli_problems(["consume", "t", "-p0", "--format", "%s\\n"]) == []


# --------------------------------------------------------------------------------------------
# Links and the command list


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_point_at_files_and_headings_that_exist() -> None:
    problems = []
    for page in PAGES:
        text = page.read_text()
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if target.startswith(("http://", "https://")):
                continue
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                problems.append(f"{page.name}: {target} does not exist")
            elif anchor:
                headings = re.findall(r"^#+ (.*)$", path.read_text(), re.MULTILINE)
                if anchor not in {github_anchor(h) for h in headings}:
                    problems.append(f"{page.name}: {target} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


def test_every_command_is_in_the_cli_page() -> None:
    from compactlog.cli.main import all_commands

    page = (ROOT / "docs" / "cli.md").read_text()
    missing = [
        " ".join(path)
        for path, command in all_commands()
        if not isinstance(command, click.Group) and f"`{' '.join(path)}`" not in page
    ]
    assert not missing, f"docs/cli.md does not name: {missing}"


def test_markers_make_chains_and_typos_are_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\necho one\n```\n\n<!-- docs-test: output -->\n```text\none\n```\n"
        "<!-- docs-test: continues tier=slow needs=kcat,gawk -->\n```bash\necho two\n```\n"
        "<!-- docs-test: not-run scripts -->\n```bash\nbash scripts/bench.sh\n```\n"
        "```python\nprint(3)\n```\n```\nnot run: no language\n```\n"
    )
    blocks = parse_page(page)
    assert [(b.language, b.runs, b.check) for b in blocks] == [
        ("bash", True, None), ("text", False, None), ("bash", True, None),
        ("bash", False, "scripts"), ("python", True, None), ("", False, None),
    ]  # fmt: skip
    chains = chains_of(blocks)
    assert [[(b.line, [o.line for o in outs]) for b, outs in c.steps] for c in chains] == [
        [(1, [6]), (10, [])],
        [(17, [])],
    ]
    assert chains[0].tiers == {"slow"}
    assert chains[0].needs == {"kcat", "gawk"}
    page.write_text("<!-- docs-test: contineus -->\n```bash\ntrue\n```\n")
    with pytest.raises(AssertionError, match="unknown docs-test word 'contineus'"):
        parse_page(page)
