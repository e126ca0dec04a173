# Sourced by the scripts in scripts/: one rule for their command-line arguments.
#
#   check_arguments "OPTIONS" "$@"     (scripts that take one optional option)
#   print_help "${BASH_SOURCE[0]}"        (scripts with arguments of their own)
#
# -h/--help prints the calling script's leading comment and exits 0. OPTIONS is a
# space-separated list of the options the script accepts besides -h/--help (may be empty);
# at most one argument is accepted. Anything else is refused with one line on stderr and
# exit status 2, before the script does any work.
print_help() {  # print_help SCRIPT: SCRIPT's leading comment, without the '# '
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$1"
}

check_arguments() {
    local allowed=$1 script=${BASH_SOURCE[1]} name
    shift
    name=${script##*/}
    if [ $# -gt 1 ]; then
        echo "$name: takes at most one argument, got $#: $* (see --help)" >&2
        exit 2
    fi
    case "${1:-}" in
        -h|--help) print_help "$script"; exit 0 ;;
        "") return 0 ;;
    esac
    local option
    for option in $allowed; do
        [ "$1" = "$option" ] && return 0
    done
    echo "$name: unknown argument '$1' (see --help)" >&2
    exit 2
}
