"""Escaping of spec text for every context it lands in (one function per target context).

A spec is user input: its free text (docs, notes, rule messages, string attribute defaults and choices, the
spec file's name) reaches emitted C++, Python, Markdown and CMake. Each function below turns any `str` into
text that, placed in its context, can only be read back as that text: it never ends the literal or comment,
never starts a new line, directive or statement. Text made of printable characters without the context's
special ones comes out unchanged, so ordinary specs emit what they always did.

    cpp_string(text)      a C/C++ string literal ("...")
    cpp_comment(text)     one line inside a `//` or a `/* */` comment
    py_string(text)       a Python string literal
    py_comment(text)      one line inside a Python `#` comment
    md_text(text)         one line of Markdown text (also safe in a table cell)
    md_comment(text)      one line inside an HTML comment `<!-- -->` of a Markdown file

Identifiers (names reaching paths and C++) are validated, not escaped: opgen.dsl.spec.ident_problem.
`FILTERS` maps the Jinja filter names (opgen.codegen.env) to these functions.
"""

from __future__ import annotations

import re

_CPP_SIMPLE = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\a": "\\a",
               '"': '\\"', "\\": "\\\\"}


def _utf8_octal(ch: str) -> str:
    """Octal escapes (`\\ooo`, never longer than three digits) of a character's UTF-8 bytes (a lone
    surrogate as its surrogatepass bytes)."""
    return "".join(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass"))


def cpp_string(text) -> str:
    """A C/C++ narrow string literal holding `text` exactly (UTF-8): quotes, backslashes and control characters
    escaped, non-ASCII as universal character names (a lone surrogate as its bytes), the second `?` of `??`
    escaped (no trigraph in pre-C++17 modes). Raises TypeError when `text` is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"cpp_string takes a str, got {type(text).__name__}")
    out = ['"']
    prev = ""
    for ch in text:
        c = ord(ch)
        if ch in _CPP_SIMPLE:
            out.append(_CPP_SIMPLE[ch])
        elif ch == "?" and prev == "?":
            out.append("\\?")
        elif 0x20 <= c < 0x7F:
            out.append(ch)
        elif c < 0xA0 or 0xD800 <= c <= 0xDFFF:    # C0/C1 controls, DEL, lone surrogates: raw bytes
            out.append(_utf8_octal(ch))
        elif c <= 0xFFFF:
            out.append(f"\\u{c:04x}")
        else:
            out.append(f"\\U{c:08x}")
        prev = ch
    out.append('"')
    return "".join(out)


def _visible(text: str, specials: str) -> str:
    """`text` on one line: every character that is not printable (line and paragraph separators, controls,
    bidi overrides, lone surrogates) or is in `specials` written as a Python-style `\\xNN`/`\\uXXXX`/
    `\\UXXXXXXXX` escape. The result holds no line break and no raw backslash at its end."""
    out = []
    for ch in str(text):
        c = ord(ch)
        if ch.isprintable() and ch not in specials and not 0xD800 <= c <= 0xDFFF:
            out.append(ch)
        elif c <= 0xFF:
            out.append(f"\\x{c:02x}")
        elif c <= 0xFFFF:
            out.append(f"\\u{c:04x}")
        else:
            out.append(f"\\U{c:08x}")
    return "".join(out)


def cpp_comment(text) -> str:
    """`text` as one line safe inside a C/C++ `//` or `/* */` comment: no line break, no backslash (a
    trailing one would splice the next line into a `//` comment), `*/` and `/*` broken, `??` broken (a trigraph
    `??/` is a backslash in pre-C++17 modes)."""
    s = _visible(text, "\\")
    s = s.replace("*/", "*\\x2f").replace("/*", "/\\x2a")
    return s.replace("??", "?\\x3f")


def py_string(text) -> str:
    """A Python string literal of `text` (repr of a str: one line, every non-printable character escaped).
    Raises TypeError when `text` is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"py_string takes a str, got {type(text).__name__}")
    return repr(text)


def py_literal(value) -> str:
    """A Python literal of a value made of str, int, float, bool, None, tuples and lists of them (repr: strings
    come out as py_string does). Raises TypeError for anything else (its repr may not be a literal)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            py_literal(v)
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    raise TypeError(f"py_literal: {type(value).__name__} has no Python literal")


_CODING = re.compile(r"coding([:=])")


def py_comment(text) -> str:
    """`text` as one line safe inside a Python `#` comment: no line break (nor anything Python or an editor
    takes for one: form feed, \\x1c-\\x1e, NEL, U+2028/2029), no NUL, no bidi override, and no
    `coding:`/`coding=` (on the first two lines a comment holding it declares the file's encoding, PEP 263)."""
    s = _visible(text, "\\")
    return _CODING.sub(lambda m: "coding" + ("\\x3a" if m.group(1) == ":" else "\\x3d"), s)


_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


def md_text(text) -> str:
    """`text` as one line of Markdown, also safe in a table cell: runs of whitespace (line breaks included)
    become one space, pipes escaped, a `<` that would open raw HTML (a tag, a comment, `</`, `<?`) written
    `&lt;` (so `a <= b` stays as it is), other non-printable characters escaped."""
    s = " ".join(str(text).split()).replace("|", "\\|")
    return _visible(_HTML_START.sub("&lt;", s), "")


def md_comment(text) -> str:
    """`text` as one line inside an HTML comment (`<!-- ... -->`) of a Markdown file: no line break, no `--`
    (which may end the comment), no `>` or `<`."""
    s = _visible(text, "")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    while "--" in s:
        s = s.replace("--", "-&#45;")
    return s


FILTERS = {"cstr": cpp_string, "ccomment": cpp_comment, "pystr": py_string, "py": py_literal,
           "pycomment": py_comment, "md": md_text, "mdcomment": md_comment}
"""Jinja filter name -> escaping function (registered by opgen.codegen.env.template_env)."""
