# Shared by the bench scripts' tests (sourced): a failure's line, and the
# check of a refused argument.

fail() { echo "FAIL: $*"; exit 1; }

# `refused SCRIPT FIXED... -- ARGS...`: bash SCRIPT FIXED... ARGS... exits 2
# with one line on stderr that names ARGS' first word (the flag at fault).
refused() {
  local script=$1 code=0 err
  shift
  local fixed=()
  while [ "$1" != -- ]; do
    fixed+=("$1")
    shift
  done
  shift
  err=$(bash "$script" "${fixed[@]}" "$@" 2>&1 > /dev/null) || code=$?
  [ "$code" -eq 2 ] || fail "$* exited $code, not 2"
  [ "$(wc -l <<< "$err")" -eq 1 ] || fail "$*: more than one line: $err"
  grep -qF -- "$1" <<< "$err" || fail "$*: the message does not name $1: $err"
}
