"""Arguments a shell would act on: each must reach the command verbatim, and MARKER stay untouched.

Tests replace ``MARKER`` with a path and check, after running a command with these arguments
through a transport, that nothing created it.
"""

HOSTILE = [
    "$(touch MARKER)",
    "`touch MARKER`",
    "; touch MARKER",
    "| touch MARKER",
    "&& touch MARKER",
    "'single' \"double\" \\back\\slash",
    "line one\nline two\n",
    "*",
    "/etc/pass*",
    "-n",
    "--help",
    "",
    " leading and trailing spaces ",
    "tab\there",
    "$HOME ${PATH} $1 $@ $$",
    "!bang !! ~root",
    "ünïcödé ✓",
    "a=b",
    ">MARKER",
]
