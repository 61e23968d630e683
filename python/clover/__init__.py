"""clover: Python bindings for the clover inference engine (block-diffusion Qwen3.5-MoE models).

    import clover
    m = clover.Model()                      # the built-in demo model; or Model("model.gguf")
    print(m.generate("Hello", max_tokens=32, seed=1))
    for piece in m.stream("Hello"): print(piece, end="")
    m.chat([{"role": "user", "content": "Hi"}])

A thin ctypes layer over include/clover.h (docs/PYTHON.md)."""
from ._model import Error, Model, Session, Stats, default_model_path

__all__ = ["Model", "Session", "Stats", "Error", "default_model_path", "version"]
__version__ = "0.1.0"


def version() -> str:
    """The engine library's version string."""
    from ._lib import lib
    return lib().clover_version().decode()
