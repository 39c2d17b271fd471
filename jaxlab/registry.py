"""A tiny name -> constructor registry, so configs pick models, losses and optimizers by name."""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T", bound=Callable[..., Any])


class Registry(Generic[T]):
  """Maps names to constructors; unknown names raise an error listing the valid ones."""

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: dict[str, T] = {}

  def register(self, name: str) -> Callable[[T], T]:
    def decorator(fn: T) -> T:
      if name in self._entries:
        raise ValueError(f"{self.kind} {name!r} is already registered")
      self._entries[name] = fn
      return fn
    return decorator

  def get(self, name: str) -> T:
    try:
      return self._entries[name]
    except KeyError:
      raise KeyError(
          f"unknown {self.kind} {name!r}; valid names: {', '.join(sorted(self._entries))}"
      ) from None

  def names(self) -> list[str]:
    return sorted(self._entries)

  def __contains__(self, name: str) -> bool:
    return name in self._entries
