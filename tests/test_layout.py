"""The drop-in layout: every generated package, laid into a skeleton of the repository its spec
names, is found by that repository's build and every path the build globs resolves (docs/reference/ops_package.md
§2-3).

The skeleton is a CMake project (configured with `cmake`, no compiler needed) whose top level discovers op
directories the way each repository does — ops-nn: categories of OP_CATEGORY_LIST, an op directory is entered when it
has CMakeLists.txt (without add_sources) or op_host/CMakeLists.txt, then each of its subdirectories with a
CMakeLists.txt; ops-transformer: `<category>/*/op_host/CMakeLists.txt` of posembedding/moe/ffn/mc2/gmm (and the
op_graph beside it), `attention/<op>` through its own CMakeLists.txt or op_host/ — and whose stand-ins of the
repositories' functions (add_modules_sources, add_graph_plugin_sources, add_modules_ut_sources, AddOpTestCase,
add_op_to_compiled_list, add_ops_compile_options, target_sources) perform the globs the real ones do and record
what they found. So the package's own CMake files are parsed and run by CMake, and the test asserts on the record:
the OPTYPE is the op directory, ACLNNTYPE aclnn_exclude, op_api/*.cpp, op_api/aclnn_*.h, *_infershape*.cpp,
*_tiling*.cpp, <op>_def*.cpp and op_graph/*_proto*.h each find the package's files, the UT globs find the UT sources.
Beside CMake: op_host/config/<soc>/<op>_binary.json names the OpDef type for every SoC of the spec, every quoted
include of op_kernel/* resolves inside op_kernel/ (kernel_src_copy copies only op_kernel/*) or is a CANN header, the
host tiling includes ../op_kernel/, and tests/assets/golden.py defines __golden__.

The six committed packages and four example specs generated to a temporary tree are laid out (the examples in the
repository their spec declares, or ops-nn's vfusion by default).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from opgen.codegen import default_out_dir, generate_cached
from opgen.codegen.layout import binary_config_path
from opgen.codegen.model import OpModel
from opgen.dsl.package import REPOSITORY_CATEGORIES
from opgen.registry import all_specs, load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["rms_norm", "swiglu", "modulate", "geglu"]
CANN_KERNEL_HEADERS = {"kernel_operator.h"}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")]

# Stand-ins of the repositories' CMake functions: the globs of docs/reference/ops_package.md §2-3, recorded.
COMMON = r'''
cmake_minimum_required(VERSION 3.16)
project(opgen_skeleton NONE)
set(RECORD ${CMAKE_BINARY_DIR}/record.txt)
file(WRITE ${RECORD} "")
set(ENABLE_TEST ON)
set(UT_TEST_ALL ON)
set(BUILD_OPEN_PROJECT ON)
set(OP_TILING_MODULE_NAME tiling_ut)
set(OP_INFERSHAPE_MODULE_NAME infershape_ut)
set(OP_API_MODULE_NAME opapi_ut)
set(OPHOST_NAME ophost)
function(record)
  string(REPLACE ";" "," line "${ARGN}")
  file(APPEND ${RECORD} "${line}\n")
endfunction()
function(glob_record what)
  file(GLOB found RELATIVE ${SKELETON_ROOT} ${ARGN})
  list(SORT found)
  string(REPLACE ";" "+" found "${found}")
  record("${what}=${found}")
endfunction()
function(target_sources target)
  set(files ${ARGN})
  list(REMOVE_ITEM files PRIVATE PUBLIC INTERFACE)
  foreach(f ${files})
    if(NOT IS_ABSOLUTE ${f})
      set(f ${CMAKE_CURRENT_SOURCE_DIR}/${f})
    endif()
    file(RELATIVE_PATH rel ${SKELETON_ROOT} ${f})
    if(EXISTS ${f})
      record("target_sources=${target}" "${rel}")
    else()
      record("missing_source=${target}" "${rel}")
    endif()
  endforeach()
endfunction()
function(add_graph_plugin_sources)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  glob_record("graph_proto:${dir}" ${dir}/*_proto*.h)
endfunction()
function(add_modules_ut_sources)
  cmake_parse_arguments(M "" "HOSTNAME;UT_NAME;MODE;DIR" "" ${ARGN})
  set(module ${M_HOSTNAME}${M_UT_NAME})
  if(module STREQUAL OP_TILING_MODULE_NAME)
    glob_record("ut_tiling:${M_DIR}" ${M_DIR}/test_*_tiling.cpp)
  elseif(module STREQUAL OP_INFERSHAPE_MODULE_NAME)
    glob_record("ut_infershape:${M_DIR}" ${M_DIR}/test_*_infershape.cpp)
  elseif(module STREQUAL OP_API_MODULE_NAME)
    glob_record("ut_opapi:${M_DIR}" ${M_DIR}/test_aclnn_*.cpp)
  else()
    record("ut_unknown_module=${module}")
  endif()
endfunction()
function(AddOpTestCase op socs options)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  glob_record("ut_kernel:${op}" ${dir}/test_${op}*.cpp)
  record("ut_kernel_args:${op}=${ARGC}")
  if(ARGC GREATER 3)
    foreach(f ${ARGV3})
      if(EXISTS ${f})
        record("ut_kernel_tiling_source:${op}=ok")
      else()
        record("ut_kernel_tiling_source:${op}=missing:${f}")
      endif()
    endforeach()
  endif()
endfunction()
macro(add_op_to_compiled_list)
  get_filename_component(parent ${CMAKE_CURRENT_SOURCE_DIR} DIRECTORY)
  file(RELATIVE_PATH rel ${SKELETON_ROOT} ${parent})
  record("compiled_op=${rel}")
endmacro()
function(add_ops_compile_options)
  cmake_parse_arguments(M "" "OP_NAME" "COMPUTE_UNIT;OPTIONS" ${ARGN})
  record("compile_options:${M_OP_NAME}=${M_OPTIONS}")
endfunction()
function(add_modules_sources)
  cmake_parse_arguments(M "" "HOSTNAME;MODE;DISABLE_IN_OPP" "OPTYPE;ACLNNTYPE;DEPENDENCIES;DIR" ${ARGN})
  if(M_DIR)
    set(src ${M_DIR})
  else()
    set(src ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  get_filename_component(root ${src} DIRECTORY)
  file(RELATIVE_PATH rel ${SKELETON_ROOT} ${root})
  record("modules=${rel}" "optype=${M_OPTYPE}" "aclnntype=${M_ACLNNTYPE}")
  glob_record("opapi:${rel}" ${src}/op_api/*.cpp)
  glob_record("opapi_headers:${rel}" ${src}/op_api/aclnn_*.h)
  glob_record("infershape:${rel}" ${src}/*_infershape*.cpp)
  glob_record("tiling:${rel}" ${src}/*_tiling*.cpp)
  glob_record("def:${rel}" ${src}/${M_OPTYPE}_def*.cpp)
  glob_record("proto:${rel}" ${root}/op_graph/*_proto*.h)
endfunction()
'''

# ops-nn: cmake/func.cmake add_category_subdirectory / add_op_subdirectory (docs/reference/ops_package.md §2.1)
NN_DISCOVERY = r'''
foreach(category @CATEGORIES@)
  if(IS_DIRECTORY ${SKELETON_ROOT}/${category})
    file(GLOB ops RELATIVE ${SKELETON_ROOT}/${category} ${SKELETON_ROOT}/${category}/*)
    foreach(op ${ops})
      set(OP_DIR ${SKELETON_ROOT}/${category}/${op})
      if(EXISTS ${OP_DIR}/CMakeLists.txt)
        file(READ ${OP_DIR}/CMakeLists.txt content)
        if(NOT content MATCHES "add_sources[ \t]*\\(")
          record("entered=${category}/${op}")
          if(NOT EXISTS ${OP_DIR}/op_host/CMakeLists.txt)
            add_subdirectory(${OP_DIR} ${CMAKE_BINARY_DIR}/${category}/${op})
          endif()
          file(GLOB subdirs RELATIVE ${OP_DIR} ${OP_DIR}/*)
          foreach(sub ${subdirs})
            if(EXISTS ${OP_DIR}/${sub}/CMakeLists.txt)
              add_subdirectory(${OP_DIR}/${sub} ${CMAKE_BINARY_DIR}/${category}/${op}/${sub})
            endif()
          endforeach()
        endif()
      elseif(EXISTS ${OP_DIR}/op_host/CMakeLists.txt)
        record("entered=${category}/${op}")
        add_subdirectory(${OP_DIR}/op_host ${CMAKE_BINARY_DIR}/${category}/${op}/op_host)
      endif()
    endforeach()
  endif()
endforeach()
'''

# ops-transformer: op_add_subdirectory's globs and the attention directory (docs/reference/ops_package.md §3); with tests enabled
# the build file(READ)s tests/CMakeLists.txt of every compiled op (cmake/custom_build.cmake).
TRANSFORMER_DISCOVERY = r'''
set(dirs)
foreach(category posembedding moe ffn mc2 gmm)
  file(GLOB found ${SKELETON_ROOT}/${category}/*/op_host/CMakeLists.txt)
  foreach(f ${found})
    get_filename_component(host ${f} DIRECTORY)
    get_filename_component(op_dir ${host} DIRECTORY)
    list(APPEND dirs ${op_dir})
  endforeach()
endforeach()
foreach(op_dir ${dirs})
  file(RELATIVE_PATH rel ${SKELETON_ROOT} ${op_dir})
  record("entered=${rel}")
  add_subdirectory(${op_dir}/op_host ${CMAKE_BINARY_DIR}/${rel}/op_host)
  if(EXISTS ${op_dir}/op_graph/CMakeLists.txt)
    add_subdirectory(${op_dir}/op_graph ${CMAKE_BINARY_DIR}/${rel}/op_graph)
  endif()
  add_subdirectory(${op_dir}/tests ${CMAKE_BINARY_DIR}/${rel}/tests)
endforeach()
if(IS_DIRECTORY ${SKELETON_ROOT}/attention)
  file(GLOB ops RELATIVE ${SKELETON_ROOT}/attention ${SKELETON_ROOT}/attention/*)
  foreach(op ${ops})
    if(EXISTS ${SKELETON_ROOT}/attention/${op}/CMakeLists.txt)
      record("entered=attention/${op}")
      add_subdirectory(${SKELETON_ROOT}/attention/${op} ${CMAKE_BINARY_DIR}/attention/${op})
    elseif(EXISTS ${SKELETON_ROOT}/attention/${op}/op_host/CMakeLists.txt)
      record("entered=attention/${op}")
      add_subdirectory(${SKELETON_ROOT}/attention/${op}/op_host ${CMAKE_BINARY_DIR}/attention/${op}/op_host)
    endif()
  endforeach()
endif()
get_property(compiled GLOBAL PROPERTY OPGEN_COMPILED)
file(STRINGS ${RECORD} lines REGEX "^compiled_op=")
foreach(line ${lines})
  string(REPLACE "compiled_op=" "" rel ${line})
  file(READ ${SKELETON_ROOT}/${rel}/tests/CMakeLists.txt tests_cmake)
  if(tests_cmake MATCHES "OpsTest_Level2_AddOp")
    record("ut_framework=${rel}" "old")
  else()
    record("ut_framework=${rel}" "new")
  endif()
endforeach()
'''


def _packages(tmp: Path) -> list[tuple[object, Path]]:
    """(spec, package directory) of the six committed packages and of EXAMPLES generated under tmp."""
    out = [(s, default_out_dir() / OpModel(s).snake) for s in all_specs()]
    for name in EXAMPLES:
        spec = load_spec(str(ROOT / "examples" / "specs" / f"{name}.py"))
        d = tmp / "gen" / OpModel(spec).snake
        for rel, text in generate_cached(spec)[1].items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        out.append((spec, d))
    return out


def _configure(skeleton: Path, build: Path, discovery: str, categories) -> list[str]:
    text = COMMON + discovery.replace("@CATEGORIES@", " ".join(categories))
    (skeleton / "CMakeLists.txt").write_text(f"set(SKELETON_ROOT {skeleton.as_posix()})\n" + text)
    r = subprocess.run(["cmake", "-S", str(skeleton), "-B", str(build), "-Wno-dev"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return (build / "record.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory):
    """{repository: (skeleton root, record lines)} with every package copied to <category>/<op_snake>/."""
    tmp = tmp_path_factory.mktemp("layout")
    packages = _packages(tmp)
    result = {}
    for repo, discovery in (("ops-nn", NN_DISCOVERY), ("ops-transformer", TRANSFORMER_DISCOVERY)):
        skeleton = tmp / repo
        mine = [(s, d) for s, d in packages if s.repository == repo]
        for spec, d in mine:
            shutil.copytree(d, skeleton / spec.category / OpModel(spec).snake)
        record = _configure(skeleton, tmp / f"build-{repo}", discovery, REPOSITORY_CATEGORIES[repo])
        result[repo] = (skeleton, record, mine)
    assert {s.repository for s, _d in packages} == {"ops-nn", "ops-transformer"}
    return result


def _value(record, prefix):
    hits = [line.split("=", 1)[1] for line in record if line.startswith(prefix + "=")]
    return hits


def test_every_package_is_entered_and_globs_its_files(laid_out):
    checked = 0
    for repo, (skeleton, record, mine) in laid_out.items():
        for spec, _d in mine:
            m = OpModel(spec)
            rel = f"{spec.category}/{m.snake}"
            assert f"entered={rel}" in record, (repo, rel)
            mods = [line for line in record if line.startswith(f"modules={rel},")]
            assert mods == [f"modules={rel},optype={m.snake},aclnntype=aclnn_exclude"], (rel, mods)

            def files(kind):
                (v,) = _value(record, f"{kind}:{rel}")
                return sorted(v.split("+")) if v else []
            host = f"{rel}/op_host"
            assert files("opapi") == sorted([f"{host}/op_api/{m.api_snake}.cpp", f"{host}/op_api/{m.snake}.cpp"])
            assert files("opapi_headers") == [f"{host}/op_api/{m.api_snake}.h"]
            assert files("infershape") == [f"{host}/{m.snake}_infershape.cpp"]
            assert files("tiling") == [f"{host}/{m.snake}_tiling.cpp"]
            assert files("def") == [f"{host}/{m.snake}_def.cpp"]
            assert files("proto") == [f"{rel}/op_graph/{m.snake}_proto.h"]
            assert _value(record, f"graph_proto:{skeleton}/{rel}/op_graph") == [f"{rel}/op_graph/{m.snake}_proto.h"]
            ut = f"{skeleton}/{rel}/tests/ut/op_host"
            assert _value(record, f"ut_tiling:{ut}") == [f"{rel}/tests/ut/op_host/test_{m.snake}_tiling.cpp"]
            assert _value(record, f"ut_infershape:{ut}") == [f"{rel}/tests/ut/op_host/test_{m.snake}_infershape.cpp"]
            assert _value(record, f"ut_kernel:{m.snake}") == [f"{rel}/tests/ut/op_kernel/test_{m.snake}.cpp"]
            assert _value(record, f"ut_opapi:{ut}/op_api") == [f"{rel}/tests/ut/op_host/op_api/test_{m.api_snake}.cpp"]
            if repo == "ops-transformer":
                assert f"compiled_op={rel}" in record
                assert f"target_sources=op_host_aclnnExc,{host}/{m.snake}_def.cpp" in record
                assert f"ut_framework={rel},new" in record
                assert _value(record, f"ut_kernel_args:{m.snake}") == ["4"]
                assert _value(record, f"ut_kernel_tiling_source:{m.snake}") == ["ok"]
                assert (skeleton / rel / "tests" / "ut" / "op_kernel" / f"{m.snake}_tiling.h").is_file()
                assert _value(record, f"compile_options:{m.op}") == ["--cce-auto-sync=off"]
            else:
                assert _value(record, f"ut_kernel_args:{m.snake}") == ["3"]
                assert (skeleton / rel / "tests" / "ut" / "op_kernel" / f"{m.snake}_tiling_def.h").is_file()
            checked += 1
        assert not [line for line in record if line.startswith(("missing_source", "ut_unknown_module"))], record
    assert checked == 6 + len(EXAMPLES)


def test_binary_configs_name_the_opdef_type_for_every_soc(laid_out):
    for _repo, (skeleton, _record, mine) in laid_out.items():
        for spec, _d in mine:
            m = OpModel(spec)
            root = skeleton / spec.category / m.snake
            op_add = re.findall(r"OP_ADD\((\w+)\)", (root / "op_host" / f"{m.snake}_def.cpp").read_text())
            assert op_add == [spec.name]
            for soc in spec.socs:
                path = root / binary_config_path(spec, soc)
                text = path.read_text()
                # the build greps the "op_type" line and takes the quoted word after it
                line = [ln for ln in text.splitlines() if re.search(r'\bop_type\b', ln)]
                assert len(line) == 1 and re.search(r'"op_type": "(\w+)"', line[0]).group(1) == spec.name
                data = json.loads(text)
                rows = spec.dtype_rows or [{}]
                assert len(data["op_list"]) == len(rows) == len({b["bin_filename"] for b in data["op_list"]})
                for b in data["op_list"]:
                    assert [i["name"] for i in b["inputs"]] == [i.name for i in spec.inputs]
                    assert [o["name"] for o in b["outputs"]] == [o.name for o in spec.outputs]
                    assert [a["name"] for a in b.get("attrs", [])] == [a.name for a in spec.attrs]
                    assert b["bin_filename"].startswith(f"{spec.name}_")
            assert sorted(p.name for p in (root / "op_host" / "config").iterdir()) == sorted(spec.socs)


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def test_kernel_sources_include_only_op_kernel_or_cann_headers(laid_out):
    for _repo, (skeleton, _record, mine) in laid_out.items():
        for spec, _d in mine:
            m = OpModel(spec)
            kernel = skeleton / spec.category / m.snake / "op_kernel"
            assert (kernel / f"{m.snake}.cpp").is_file()
            for f in sorted(kernel.iterdir()):
                for inc in _INCLUDE.findall(f.read_text()):
                    if inc in CANN_KERNEL_HEADERS:
                        continue
                    target = (kernel / inc).resolve()
                    assert target.parent == kernel.resolve() and target.is_file(), (f, inc)
            text = (kernel / f"{m.snake}.cpp").read_text()
            assert f"REGISTER_TILING_DEFAULT(optiling::{spec.name}TilingData);" in text
            keys = re.findall(r"TILING_KEY_IS\((\w+)\)", text)
            header = (kernel / f"{m.snake}_tiling_key.h").read_text()
            declared = dict(re.findall(r"#define (\w+)\s+(\d+)", header))
            assert keys and all(k in declared for k in keys)
            tiling = (kernel.parent / "op_host" / f"{m.snake}_tiling.cpp").read_text()
            assert f'#include "../op_kernel/{m.snake}_tiling_data.h"' in tiling
            assert not list((kernel.parent / "op_host").glob("*_tiling.h"))


def test_golden_readme_and_api_doc_are_in_place(laid_out):
    for _repo, (skeleton, _record, mine) in laid_out.items():
        for spec, _d in mine:
            root = skeleton / spec.category / OpModel(spec).snake
            golden = (root / "tests" / "assets" / "golden.py").read_text()
            assert "__golden__ = {" in golden
            readme = (root / "README.md").read_text()
            assert f"`{spec.category}/{OpModel(spec).snake}`" in readme
            for note in spec.package_notes:
                assert f"`{note.path}`" in readme and note.reason[:40] in readme
            assert (root / "docs" / f"{spec.aclnn}.md").is_file()
