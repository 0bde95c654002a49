"""``relaxrepro completion bash|zsh|fish``: a shell completion script, written from the parser's own grammar
(:func:`relaxrepro.cli.grammar`, handed over as ``args.grammar``), so a new command or option completes
without anyone editing a script."""

from __future__ import annotations

import sys

from ._common import Exit

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    import argparse
    from typing import Any, Dict, List

_TOP_OPTIONS = ("-h", "--help", "--version")


def run(args: argparse.Namespace) -> int:
    render = {"bash": bash, "fish": fish, "zsh": zsh}[args.shell]
    sys.stdout.write(render(args.grammar))
    return Exit.OK


def _options(command: Dict[str, Any]) -> List[str]:
    return [s for option in command["options"] for s in option["strings"]]


def bash(commands: List[Dict[str, Any]]) -> str:
    """A bash script: ``complete -F _relaxrepro relaxrepro``; files where no word is known."""
    cases = "".join(
        "        %s) opts=%s; words=%s ;;\n" % (c["name"], _sh(" ".join(_options(c))), _sh(" ".join(c["words"])))
        for c in commands)
    return (
        "# bash completion for relaxrepro: source <(relaxrepro completion bash)\n"
        "_relaxrepro() {\n"
        "    local cur=${COMP_WORDS[COMP_CWORD]} cmd= opts= words= i\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --) return 0 ;;\n"
        "            -*) ;;\n"
        "            *) cmd=${COMP_WORDS[i]}; break ;;\n"
        "        esac\n"
        "    done\n"
        "    if [[ -z $cmd ]]; then\n"
        "        COMPREPLY=($(compgen -W %s -- \"$cur\"))\n"
        "        return 0\n"
        "    fi\n"
        "    case $cmd in\n"
        "%s"
        "    esac\n"
        "    if [[ $cur == -* ]]; then\n"
        "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
        "    elif [[ -n $words ]]; then\n"
        "        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
        "    fi\n"
        "    return 0\n"
        "}\n"
        "complete -o default -F _relaxrepro relaxrepro\n"
    ) % (_sh(" ".join(list(_TOP_OPTIONS) + [c["name"] for c in commands])), cases)


def zsh(commands: List[Dict[str, Any]]) -> str:
    """A zsh script for ``compdef``: commands with their help, then options, positional words or files."""
    described = "".join("    %s\n" % _sh("%s:%s" % (c["name"], c["help"].replace(":", "\\:"))) for c in commands)
    cases = "".join(
        "    (%s) opts=(%s); choices=(%s) ;;\n" % (c["name"], " ".join(_sh(o) for o in _options(c)),
                                                 " ".join(_sh(w) for w in c["words"]))
        for c in commands)
    return (
        "#compdef relaxrepro\n"
        "# zsh completion for relaxrepro: source <(relaxrepro completion zsh), after compinit\n"
        "_relaxrepro() {\n"
        "  local -a commands opts choices\n"
        "  commands=(\n"
        "%s"
        "  )\n"
        "  if (( CURRENT == 2 )); then\n"
        "    _describe -t commands 'relaxrepro command' commands\n"
        "    return\n"
        "  fi\n"
        "  case ${words[2]} in\n"
        "%s"
        "  esac\n"
        "  if [[ ${words[CURRENT]} == -* ]]; then\n"
        "    compadd -- $opts\n"
        "  elif (( ${#choices} )); then\n"
        "    compadd -- $choices\n"
        "  else\n"
        "    _files\n"
        "  fi\n"
        "}\n"
        "if (( $+functions[compdef] )); then compdef _relaxrepro relaxrepro; fi\n"
    ) % (described, cases)


def fish(commands: List[Dict[str, Any]]) -> str:
    """A fish script of ``complete -c relaxrepro`` lines: commands first, then each one's options."""
    lines = ["# fish completion for relaxrepro: relaxrepro completion fish | source",
             "complete -c relaxrepro -n __fish_use_subcommand -l version -d 'print the version'"]
    for c in commands:
        lines.append("complete -c relaxrepro -n __fish_use_subcommand -f -a %s -d %s" % (c["name"], _fish(c["help"])))
        seen = "'__fish_seen_subcommand_from %s'" % c["name"]
        for option in c["options"]:
            flags = " ".join("-l " + s[2:] if s.startswith("--") else "-s " + s[1:] for s in option["strings"])
            lines.append("complete -c relaxrepro -n %s %s%s" % (seen, flags, " -r" if option["value"] else ""))
        if c["words"]:
            lines.append("complete -c relaxrepro -n %s -f -a %s" % (seen, _fish(" ".join(c["words"]))))
    return "\n".join(lines) + "\n"


def _sh(text: str) -> str:
    """``text`` as one single-quoted word of bash or zsh."""
    return "'%s'" % text.replace("'", "'\\''")


def _fish(text: str) -> str:
    """``text`` as one single-quoted word of fish (which escapes ``\\`` and ``'`` inside the quotes)."""
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")
