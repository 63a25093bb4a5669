"""lowp's layout keeps its shape: no import circles (lazy imports included), data flowing one way between rooms, and
no folder of more than 15 modules (docs/layout.md says why)."""
from __future__ import annotations

import pytest

from tests import import_graph

MOST_MODULES_PER_FOLDER = 15

# The rooms from the bottom up: a module may import its own room and the rooms below it, never one above. Rooms on
# one line are peers (neither imports the other's room; the circle test keeps single modules honest).
LAYERS = [
    ["lowp.isa_models"],
    ["lowp.emulator"],
    ["lowp.kernels"],
    ["lowp.conformance.contracts"],
    ["lowp.conformance.diagnosis"],
    ["lowp.conformance.search"],
    ["lowp.conformance.report", "lowp.conformance.prove"],
    ["lowp.conformance.run"],
    ["lowp.conformance.libraries"],
    ["lowp.conformance.__init__"],
    ["lowp.conformance.pytest_plugin"],
    ["lowp.conformance.peers", "lowp.conformance.bench"],
    ["lowp.conformance.studies"],
    ["lowp.cli"],                     # the face: the parser and its shared error handling; it finds each command by
    ["lowp.commands"],                # name, and a command may use the face's helpers
    ["lowp.__main__"],
]
# The package root: its __init__ holds only __version__ and imports nothing, so every room may read it.
ROOT_PACKAGE = "lowp"


def room_of(module: str) -> tuple[int, str]:
    """(layer, room) of a module: the longest room name that is the module or one of its parents."""
    name = module + ".__init__" if module == "lowp.conformance" else module
    best = None
    for level, rooms in enumerate(LAYERS):
        for room in rooms:
            if (name == room or name.startswith(room + ".")) and (best is None or len(room) > len(best[1])):
                best = (level, room)
    assert best is not None, f"{module}: in no room of tests/test_layout.py's LAYERS; give it one"
    return best


@pytest.fixture(scope="module")
def edges():
    return import_graph.graph()


def test_the_graph_sees_lazy_imports_and_package_names():
    """The reader itself: an import inside a function is an edge, and `from P import name` is an edge to P unless
    name is a module of P (then to that module)."""
    known = import_graph.modules()
    found = import_graph.imports_of("lowp.conformance.run.runner", known["lowp.conformance.run.runner"], known)
    assert {"lowp.conformance.run.pool", "lowp.conformance.run.ray_runner"} <= found
    circle = import_graph.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert circle == [["a", "b", "c"]]
    assert import_graph.a_cycle_in(circle[0], {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_circles(edges):
    found = import_graph.circles(edges)
    named = ["  " + " -> ".join(import_graph.a_cycle_in(c, edges)) for c in found]
    assert not found, "import circles (move what both sides need into a lower module):\n" + "\n".join(named)


def test_data_flows_one_way_between_rooms(edges):
    upward = []
    for module, targets in sorted(edges.items()):
        if module == ROOT_PACKAGE:
            continue
        level, room = room_of(module)
        for target in sorted(targets):
            if target == ROOT_PACKAGE:
                continue
            target_level, target_room = room_of(target)
            if target_level > level or (target_level == level and target_room != room):
                upward.append(f"  {module} ({room}) imports {target} ({target_room})")
    assert not upward, "imports that go up or across the rooms (tests/test_layout.py LAYERS):\n" + "\n".join(upward)


def test_the_package_root_imports_nothing(edges):
    assert edges[ROOT_PACKAGE] == set()


def test_no_folder_holds_more_than_15_modules():
    crowded = {str(folder.relative_to(import_graph.ROOT)): n for folder, n in import_graph.modules_per_folder().items()
               if n > MOST_MODULES_PER_FOLDER}
    assert not crowded, f"folders over {MOST_MODULES_PER_FOLDER} modules (split them by job): {crowded}"
