"""The function definitions of a C++ file, found by brace matching: not a
C++ parser, but it sees any signature (wrapped over lines, a template, a
constructor's initializers, a member function in a class) and counts a
function from its signature's first line to its closing brace. Comments,
string and character literals (raw ones too) and preprocessor lines are
blanked first, so a brace in them counts for nothing."""
import re

_RAW = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(')
_ACCESS = re.compile(r"(public|private|protected)\s*:(?!:)")
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def blank(text):
    """`text` with comments, literals and preprocessor lines as spaces
    (same length, same line breaks)."""
    out = list(text)
    n = len(text)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    i, line_start = 0, True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while True:
                e = text.find("\n", j)
                e = n if e < 0 else e
                if e < n and e > 0 and text[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            wipe(i, e)
            i = e
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            e = text.find("\n", i)
            e = n if e < 0 else e
            wipe(i, e)
            i = e
            continue
        if text.startswith("/*", i):
            e = text.find("*/", i + 2)
            e = n if e < 0 else e + 2
            wipe(i, e)
            i = e
            continue
        m = _RAW.match(text, i)
        if m and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            e = text.find(")" + m.group(1) + '"', m.end())
            e = n if e < 0 else e + len(m.group(1)) + 2
            wipe(m.end() - 1, e - 1)
            i = e
            continue
        if c == "'" and i > 0 and text[i - 1].isdigit():  # a digit separator: 1'000
            i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            wipe(i + 1, min(j, n))
            i = j + 1
            continue
        i += 1
    return "".join(out)


def match(code, i):
    """The offset of the bracket that closes the one at `i`."""
    stack = []
    for k in range(i, len(code)):
        ch = code[k]
        if ch in _CLOSING:
            stack.append(_CLOSING[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                raise ValueError(f"a {ch!r} on line {code.count(chr(10), 0, k) + 1} closes nothing opened")
            if not stack:
                return k
    raise ValueError(f"the {code[i]!r} on line {code.count(chr(10), 0, i) + 1} never closes")


def _head_end(code, start, stop):
    """Where a declaration's head ends: (offset of its `{`, True) or (offset
    of its `;`, False). A constructor's initializers (`: a_(x), b_{y}`) are
    part of its head."""
    depth, k, params = 0, start, False
    while k < stop:
        ch = code[k]
        if ch in "([":
            params = params or (ch == "(" and depth == 0)
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ":" and params and code[k + 1:k + 2] != ":" and code[k - 1:k] != ":":
            k += 1
            while k < stop:  # NAME(...) or NAME{...}, comma-separated, then the body
                while k < stop and code[k] not in "({;":
                    k += 1
                if k >= stop or code[k] == ";":
                    return k, False
                k = match(code, k) + 1
                while k < stop and code[k].isspace():
                    k += 1
                if k < stop and code[k] == ",":
                    k += 1
                elif k < stop and code[k] == "{":
                    return k, True
                else:
                    break
            continue
        elif depth == 0 and ch in "{;":
            return k, ch == "{"
        k += 1
    return stop, False


def _assigns(head):
    """An `=` at the head's own level: an initializer, not a default
    argument, a comparison or an operator's name."""
    head = re.sub(r"^\s*template\s*<[^{};]*?>\s*(?=[A-Za-z_])", "", head)
    depth = 0
    for k, ch in enumerate(head):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and head[k - 1:k] not in "=!<>" and head[k + 1:k + 2] != "=" \
                and not head[:k].rstrip().endswith("operator"):
            return True
    return False


def _name(head):
    """The function's name: what stands before its parameters."""
    h = re.sub(r"^\s*template\s*<[^{};]*?>\s*(?=[A-Za-z_~])", "", " ".join(head.split()))
    depth = 0
    for k, ch in enumerate(h):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0 and not h[:k].rstrip().endswith("operator"):
            m = re.search(r"((?:[A-Za-z_]\w*(?:<[^<>]*>)?\s*::\s*)*(?:~?[A-Za-z_]\w*|operator\s*\S+?))\s*$", h[:k])
            return re.sub(r"\s+", "", m.group(1)) if m else h[:k].strip()
    return h.strip()


def functions(text):
    """(name, first line, last line) of each function defined at namespace
    or class level, in order; lambdas and local classes are part of the
    function they are in."""
    code = blank(text)
    found = []
    _scope(text, code, 0, len(code), found)
    return found


def _scope(text, code, pos, stop, found):
    line = lambda offset: text.count("\n", 0, offset) + 1  # noqa: E731
    while pos < stop:
        while pos < stop and (code[pos].isspace() or code[pos] == ";"):
            pos += 1
        m = _ACCESS.match(code, pos)
        if m:
            pos = m.end()
            continue
        if pos >= stop:
            return
        start = pos
        end, body = _head_end(code, start, stop)
        if not body:
            pos = end + 1
            continue
        close = match(code, end)
        head = " ".join(code[start:end].split())
        if re.match(r'^(inline\s+)?namespace\b|^extern\s*"', head):
            _scope(text, code, end + 1, close, found)
            pos = close + 1
        elif re.match(r"^(template\s*<.*>\s*)?(struct|class|union|enum)\b", head) or _assigns(head) or "(" not in head:
            if re.match(r"^(template\s*<.*>\s*)?(struct|class|union)\b", head) and not _assigns(head):
                _scope(text, code, end + 1, close, found)
            pos = close + 1
            while pos < stop and code[pos] != ";":  # `} name;`, an initializer's `};`
                pos = match(code, pos) + 1 if code[pos] in "([{" else pos + 1
            pos += 1
        else:
            found.append((_name(head), line(start), line(close)))
            pos = close + 1


if __name__ == "__main__":
    # cxx.py FILE NAME: the first and last line of each function NAME of FILE.
    import sys
    if len(sys.argv) != 3:
        sys.exit("usage: cxx.py FILE NAME")
    for name, first, last in functions(open(sys.argv[1], encoding="utf-8").read()):
        if name == sys.argv[2]:
            print(first, last)
