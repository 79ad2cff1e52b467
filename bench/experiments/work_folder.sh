# The experiment scripts' working folder (sourced, not run): work_folder KEEP sets $work to KEEP
# (made if missing, kept at the end) or, when KEEP is empty, to a temporary folder removed on exit.
work_folder() {
  if [ -n "$1" ]; then
    mkdir -p "$1"
    work=$(cd "$1" && pwd)
  else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
  fi
}
