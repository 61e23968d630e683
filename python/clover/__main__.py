"""python -m clover COMMAND ...: the `clover` command the package carries (clover/bin/clover), with the
same arguments: `python -m clover serve -m model.gguf --port 8080`, `python -m clover run -p Hello`.
$CLOVER_BINARY names another binary."""
import os
import sys


def binary_path() -> str:
    env = os.environ.get("CLOVER_BINARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "clover")


def main() -> None:
    exe = binary_path()
    if not os.path.exists(exe):
        sys.stderr.write(f"python -m clover: the clover command is not installed ({exe}); "
                         "install the package with `pip install .` or set CLOVER_BINARY\n")
        sys.exit(1)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
