"""artemis-py: an Apache ActiveMQ Artemis-compatible broker node for Python people.

The storage core (journal, node ID) is the Rust extension ``artemis_py._native``;
everything that talks to the network runs on Trio.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("artemis-py")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "open_broker"]


def __getattr__(name: str) -> object:
    # ``artemis_py.open_broker`` without importing the broker (and the native extension)
    # for users who only want, say, the config parser.
    if name == "open_broker":
        from artemis_py.node import open_broker

        return open_broker
    raise AttributeError(f"module 'artemis_py' has no attribute {name!r}")
