"""Loading user code from ``module:attr`` and ``path/to/file.py:attr`` targets."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from ductline import Pipeline, TargetError
from ductline.apps import import_app, load_pipeline, split


@pytest.fixture(autouse=True)
def restore_import_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`import_app` puts folders on sys.path and imports modules; undo both (only
    for the modules written by these tests, under pytest's temporary folder)."""
    path = list(sys.path)
    modules = set(sys.modules)
    base = str(tmp_path_factory.getbasetemp())
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if file.startswith(base) or name.startswith("unit_app_"):
            del sys.modules[name]


def stem() -> str:
    return f"unit_app_{uuid.uuid4().hex[:12]}"


def write_app(folder: Path, name: str | None = None, body: str | None = None) -> tuple[Path, str]:
    """Write an app module defining one pipeline ``pipe`` (plus a few non-pipelines);
    returns its path and the pipeline's name."""
    name = name or stem()
    pipeline_name = f"{name}_{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(body if body is not None else (
        "from ductline import Pipeline\n"
        "def first(x):\n"
        "    return x\n"
        f"pipe = Pipeline({pipeline_name!r}).start(first)\n"
        "nothing = None\n"
        "number = 5\n"
    ), encoding="utf-8")
    return path, pipeline_name


# -- split ----------------------------------------------------------------------------

@pytest.mark.parametrize("target,expected", [
    ("pkg.mod:attr", ("pkg.mod", "attr")),
    ("mod", ("mod", None)),
    ("app.py", ("app.py", None)),
    ("app.py:pipe", ("app.py", "pipe")),
    ("dir/sub/app.py:pipe", ("dir/sub/app.py", "pipe")),
    ("/abs/dir/app.py:pipe", ("/abs/dir/app.py", "pipe")),
    ("dir/app.py", ("dir/app.py", None)),
])
def test_split(target: str, expected: tuple[str, str | None]) -> None:
    assert split(target) == expected


@pytest.mark.parametrize("target,pattern", [
    ("mod:1bad", r"'1bad' is not a Python name"),
    ("mod:", r"'' is not a Python name"),
    ("mod:a-b", r"'a-b' is not a Python name"),
    ("", r"target must be 'module:attr' or 'path/to/file\.py:attr', got ''"),
    ("  ", r"target must be"),
])
def test_split_rejects(target: str, pattern: str) -> None:
    with pytest.raises(TargetError, match=pattern):
        split(target)


def test_split_rejects_non_str() -> None:
    with pytest.raises(TargetError, match="got None"):
        split(None)  # type: ignore[arg-type]


# -- load_pipeline ----------------------------------------------------------------------

def test_path_target_with_attr(tmp_path: Path) -> None:
    path, name = write_app(tmp_path)
    pipeline, folder = load_pipeline(f"{path}:pipe")
    assert isinstance(pipeline, Pipeline)
    assert pipeline.name == name
    assert folder == str(tmp_path)
    assert sys.path[0] == str(tmp_path)
    assert pipeline.definition().nodes["first"].ref == f"{path.stem}:first"


def test_relative_path_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, name = write_app(tmp_path / "apps")
    monkeypatch.chdir(tmp_path)
    pipeline, folder = load_pipeline(f"apps/{path.name}:pipe")
    assert pipeline.name == name
    assert folder == str(tmp_path / "apps")


def test_path_target_without_attr_finds_the_only_pipeline(tmp_path: Path) -> None:
    path, name = write_app(tmp_path)
    pipeline, _ = load_pipeline(str(path))
    assert pipeline.name == name


def test_path_target_without_attr_and_two_pipelines(tmp_path: Path) -> None:
    body = ("from ductline import Pipeline\n"
            "def s(x):\n    return x\n"
            f"one = Pipeline('two_a_{uuid.uuid4().hex}').start(s)\n"
            f"two = Pipeline('two_b_{uuid.uuid4().hex}').start(s)\n")
    path, _ = write_app(tmp_path, body=body)
    with pytest.raises(TargetError, match=r"name the pipeline as .*:ATTR \(2 pipelines found in the module\)"):
        load_pipeline(str(path))


def test_module_attr_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, name = write_app(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pipeline, folder = load_pipeline(f"{path.stem}:pipe")
    assert pipeline.name == name
    assert folder is None


def test_package_module_attr_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = stem()
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("", encoding="utf-8")
    _, name = write_app(tmp_path / package, name="flows")
    monkeypatch.syspath_prepend(str(tmp_path))
    pipeline, _ = load_pipeline(f"{package}.flows:pipe")
    assert pipeline.name == name
    assert pipeline.definition().nodes["first"].ref == f"{package}.flows:first"


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(TargetError, match=rf"no such file {missing}"):
        load_pipeline(f"{missing}:pipe")


def test_missing_module() -> None:
    name = stem()
    with pytest.raises(TargetError, match=rf"cannot import '{name}': No module named '{name}'"):
        load_pipeline(f"{name}:pipe")


@pytest.mark.parametrize("attr,kind", [("nothing", "a NoneType"), ("number", "an int"), ("first", "a function")])
def test_attribute_that_is_not_a_pipeline(tmp_path: Path, attr: str, kind: str) -> None:
    path, _ = write_app(tmp_path)
    with pytest.raises(TargetError, match=rf"'{attr}' is {kind}, not a ductline Pipeline"):
        load_pipeline(f"{path}:{attr}")


def test_missing_attribute_is_target_error_naming_it(tmp_path: Path) -> None:
    path, _ = write_app(tmp_path)
    with pytest.raises(TargetError) as info:
        load_pipeline(f"{path}:no_such_pipeline")
    message = str(info.value)
    assert "'no_such_pipeline'" in message
    assert str(path) in message


def test_missing_attribute_message_says_it_is_missing(tmp_path: Path) -> None:
    path, _ = write_app(tmp_path)
    with pytest.raises(TargetError) as info:
        load_pipeline(f"{path}:no_such_pipeline")
    assert "NoneType" not in str(info.value)


def test_module_that_raises_on_import(tmp_path: Path) -> None:
    path, _ = write_app(tmp_path, body="raise RuntimeError('boom at import')\n")
    with pytest.raises(TargetError, match=r"importing '.*' raised RuntimeError: boom at import"):
        load_pipeline(f"{path}:pipe")


def test_module_with_syntax_error(tmp_path: Path) -> None:
    path, _ = write_app(tmp_path, body="def broken(:\n")
    with pytest.raises(TargetError, match=r"raised SyntaxError"):
        load_pipeline(f"{path}:pipe")


def test_module_with_broken_definition(tmp_path: Path) -> None:
    body = ("from ductline import Pipeline\n"
            f"pipe = Pipeline('broken_{uuid.uuid4().hex}').start(lambda x: x)\n")
    path, _ = write_app(tmp_path, body=body)
    with pytest.raises(TargetError, match=r"raised DefinitionError: .*not importable by name"):
        load_pipeline(f"{path}:pipe")


def test_module_with_failing_import_inside(tmp_path: Path) -> None:
    missing = stem()
    path, _ = write_app(tmp_path, body=f"import {missing}\n")
    with pytest.raises(TargetError, match=rf"importing .* raised ModuleNotFoundError: No module named '{missing}' "
                                          rf"\(at {path}:1\)$"):
        load_pipeline(f"{path}:pipe")


def test_a_missing_dependency_of_a_module_target_is_not_a_missing_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The module exists: "give a file path" would point the wrong way.
    missing = stem()
    path, _ = write_app(tmp_path, body=f"\nimport {missing}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetError) as info:
        load_pipeline(path.stem)
    message = str(info.value)
    assert f"No module named '{missing}' (at {path.name}:2)" in message
    assert "give a file path" not in message


def test_a_missing_module_target_says_where_to_run_from() -> None:
    # No file of that name here either: a file path would not help.
    name = stem()
    with pytest.raises(TargetError, match=rf"No module named '{name}' \(no file {name}\.py here either: run from "
                                          rf"the folder that holds '{name}', or add that folder to PYTHONPATH\)$"):
        load_pipeline(name)


def test_a_missing_package_of_a_module_target_is_the_target_missing() -> None:
    name = stem()
    with pytest.raises(TargetError, match=rf"cannot import '{name}\.flows': .*no file {name}/flows\.py here either: "
                                          rf"run from the folder that holds '{name}'"):
        load_pipeline(f"{name}.flows:pipe")


def test_a_file_in_a_package_whose_relative_import_fails_names_the_module_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file is imported by its stem from its own folder: inside a package its
    # relative imports cannot work, and the module form can.
    package = tmp_path / "project" / stem()
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "helpers.py").write_text("def triple(x):\n    return 3 * x\n", encoding="utf-8")
    flows = stem()
    (package / f"{flows}.py").write_text("from ductline import Pipeline\nfrom .helpers import triple\n"
                                         f"pipe = Pipeline({flows!r}).start(triple)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetError) as info:
        load_pipeline(f"project/{package.name}/{flows}.py:pipe")
    assert str(info.value).endswith(
        f"; the file is in the package {package.name!r}: give the target as {package.name}.{flows}:pipe "
        "and run from project (or with that folder on PYTHONPATH)")
    monkeypatch.chdir(tmp_path / "project")  # as it says
    assert load_pipeline(f"{package.name}.{flows}:pipe")[0].name == flows


def test_an_error_raised_in_a_module_the_app_imports_names_where(tmp_path: Path) -> None:
    helper = stem()
    (tmp_path / f"{helper}.py").write_text("def divide():\n    return 1 / 0\n\n\ndivide()\n", encoding="utf-8")
    path, _ = write_app(tmp_path, body=f"import {helper}\n")
    with pytest.raises(TargetError) as info:
        load_pipeline(str(path))
    assert str(info.value).endswith(
        f"raised ZeroDivisionError: division by zero (at {tmp_path / helper}.py:2 in divide, "
        f"called from {tmp_path / helper}.py:5, called from {path}:1)")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize(("line", "error"), [
    ("pipe = Pipeline('p').start(lambda x: x)", "DefinitionError: step '<lambda>' is not importable"),
    ("pipe = Pipeline('p').start(outer())", "DefinitionError: step 'outer.<locals>.inner' is not importable"),
    ("pipe = Pipeline('p').start(first, timeout=-1)", "ValueError: timeout must not be negative"),
    ("pipe = Pipeline('p').start(first, max_attempts=0)", "max_attempts"),
    ("pipe = Pipeline('p').start(first).chain(to=outer, delay=1.5)", "TypeError: delay must be"),
])
def test_a_definition_error_names_the_users_line_not_ductlines(tmp_path: Path, line: str, error: str) -> None:
    body = ("from ductline import Pipeline\n"
            "def first(x):\n"
            "    return x\n"
            "def outer():\n"
            "    def inner(x):\n"
            "        return x\n"
            "    return inner\n"
            f"{line}\n")
    path, _ = write_app(tmp_path, body=body)
    with pytest.raises(TargetError) as info:
        load_pipeline(f"{path}:pipe")
    message = str(info.value)
    assert error in message
    assert message.endswith(f" (at {path}:8)"), message


def test_a_definition_error_in_the_users_helper_names_the_helper_and_its_caller(tmp_path: Path) -> None:
    body = ("from ductline import Pipeline\n"
            "def build():\n"
            "    return Pipeline('p').start(lambda x: x)\n"
            "pipe = build()\n")
    path, _ = write_app(tmp_path, body=body)
    with pytest.raises(TargetError) as info:
        load_pipeline(f"{path}:pipe")
    assert str(info.value).endswith(f" (at {path}:3 in build, called from {path}:4)")


def test_import_app_returns_module_and_folder(tmp_path: Path) -> None:
    path, _ = write_app(tmp_path)
    module, folder = import_app(f"{path}:pipe")
    assert module.__name__ == path.stem
    assert folder == str(tmp_path)


def test_a_second_file_with_the_same_stem_is_refused_clearly(tmp_path: Path) -> None:
    # Workers' children import apps by module name, so two files cannot share one.
    name = stem()
    first, first_name = write_app(tmp_path / "one", name=name)
    second, _ = write_app(tmp_path / "two", name=name)
    assert load_pipeline(f"{first}:pipe")[0].name == first_name
    with pytest.raises(TargetError, match=f"a different module named '{name}' is already imported"):
        load_pipeline(f"{second}:pipe")


def test_a_stored_traceback_names_the_same_frames_as_the_exception_it_was_formatted_from(tmp_path, monkeypatch):
    """One rule for the frames an error names, from an exception or from its stored text
    (the last traceback of a chain: the exception that ended the attempt)."""
    import traceback

    from ductline.frames import where, where_stored

    monkeypatch.chdir(tmp_path)
    (tmp_path / "buggy.py").write_text("def helper(x):\n    return x / 0\n\n\ndef compute(x):\n"
                                       "    try:\n        raise KeyError(x)\n    except KeyError:\n"
                                       "        return helper(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import buggy

    try:
        buggy.compute(1)
    except ZeroDivisionError as exc:
        text = "".join(traceback.format_exception(exc))
        assert "During handling" in text
        assert where_stored(text) == where(exc)
        assert where(exc).startswith(" (at buggy.py:2 in helper, called from buggy.py:9 in compute, called from ")
    assert where_stored(None) == where_stored("") == where_stored("TimeoutError: step timed out") == ""


def test_a_run_started_by_another_thread_while_an_app_is_imported_is_not_refused(tmp_path: Path) -> None:
    """The refusal is for the app's top level, which runs in the importing thread: a
    program's other threads (a web application mounting the dashboard for an app,
    say) go on starting runs of their own meanwhile."""
    import threading
    import types

    gate = types.ModuleType(f"unit_app_gate_{uuid.uuid4().hex}")
    gate.importing = threading.Event()  # type: ignore[attr-defined]
    gate.go_on = threading.Event()  # type: ignore[attr-defined]
    sys.modules[gate.__name__] = gate
    app = tmp_path / f"slow_{uuid.uuid4().hex}.py"
    app.write_text(f"import {gate.__name__} as gate\ngate.importing.set()\ngate.go_on.wait(60)\n")
    imported: list[BaseException | None] = []

    def load() -> None:
        try:
            import_app(str(app))
            imported.append(None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            imported.append(exc)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        assert gate.importing.wait(60)
        mine = Pipeline(f"unit_other_thread_{uuid.uuid4().hex[:8]}").start(_plus_one)
        handle = mine.trigger(1, database=f"sqlite:///{tmp_path / 'other.db'}")
        assert handle.status() == "pending"
    finally:
        gate.go_on.set()
        loader.join(60)
    assert imported == [None]


def test_an_import_inside_an_import_leaves_the_outer_one_marked() -> None:
    from ductline.execution import importing

    with importing.importing("outer.py"):
        with importing.importing("inner.py"):
            pass
        with pytest.raises(RuntimeError, match=r"while ductline imported outer\.py"):
            importing.refuse("p.trigger()")
    importing.refuse("p.trigger()")  # nothing imported: nothing refused


def _plus_one(x: int) -> int:
    return x + 1


def test_a_traceback_quoted_in_the_message_is_not_taken_for_the_step_s(tmp_path, monkeypatch):
    """A step that raises with another program's traceback in its message (a remote
    job's, a subprocess's) is named where it raised, not at the quoted frames."""
    import traceback

    from ductline.frames import where, where_stored

    monkeypatch.chdir(tmp_path)
    (tmp_path / "relay.py").write_text(
        "def relay():\n    raise RuntimeError('the job said:\\nTraceback (most recent call last):\\n'\n"
        "                       '  File \"/remote/job.py\", line 99, in main\\nKeyError: 1')\n\n\n"
        "def deep(n):\n    return deep(n + 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import relay

    for call in (relay.relay, lambda: relay.deep(0)):
        try:
            call()
        except (RuntimeError, RecursionError) as exc:
            text = "".join(traceback.format_exception(exc))
            assert where_stored(text) == where(exc)
            assert "/remote/job.py" not in where_stored(text)
            assert where_stored(text).startswith(" (at relay.py:")
