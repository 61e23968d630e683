"""python -m clover COMMAND ...: the `clover` command the package carries (clover/bin/clover), with the
same arguments: `python -m clover serve -m model.gguf --port 8080`, `python -m clover run -p Hello`.
$CLOVER_BINARY names another binary. Without -m the command uses the package's default model
(clover/default-model.gguf, through $CLOVER_DEFAULT_MODEL unless that is set): the wheel carries the
model once, as that file, and its command embeds only the tiny random one."""
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
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default-model.gguf")
    if not os.environ.get("CLOVER_DEFAULT_MODEL") and os.path.exists(model):
        os.environ["CLOVER_DEFAULT_MODEL"] = model
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
