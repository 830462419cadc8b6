"""LLM models: the endpoint's list and each owner's run-time choice (not persisted)."""

from __future__ import annotations

import asyncio
from fnmatch import fnmatchcase
from typing import Any

from ..errors import AstroError, InvalidRequest, PermissionDenied
from .common import AppBase, unique

MODEL_NAME_MAX = 200
NO_ENDPOINT = (
    "no LLM endpoint is configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL (and LLM_MODEL) for another "
    "OpenAI-compatible endpoint, then restart Jupyter; `astro-jupyter doctor` checks it"
)
MODELS_LIST_SECS = 30.0  # the longest the model list of the endpoint is waited for
MODELS_SHOWN = 40  # names listed when a model is refused (an endpoint may serve hundreds)


class ModelNotAllowed(PermissionDenied):
    """A model outside ``AstroConfig.allowed_models`` (HTTP 403; the sidebar shows the allowed ones)."""

    reason = "model_not_allowed"


class ModelsMixin(AppBase):
    _warm: "asyncio.Task[None] | None"

    def _llm(self) -> Any:
        runtime_llm = getattr(self._runtime, "llm", None) if self._runtime is not None else None
        return runtime_llm or self.services.llm

    async def models(self, owner: str = "") -> dict[str, Any]:
        """The owner's current model and the endpoint's list; an unreachable endpoint gives the configured ones + a warning."""
        if self._warm is not None:
            try:
                await self._warm
            except Exception:  # noqa: BLE001 - list_models reports the real problem below
                pass
        cfg = self.config
        configured = unique([cfg.llm_model, cfg.llm_fallback_model, *cfg.llm_fallback_chain])
        warning: str | None = None
        available: list[str] = []
        if not cfg.llm_configured:  # the sidebar's empty state says what to set (and offers the demo)
            return {"current": self.current_model(owner), "models": configured, "configured": configured,
                    "source": "none", "warning": NO_ENDPOINT}
        try:
            available = await self.endpoint_models()
        except asyncio.TimeoutError:
            warning = f"the LLM endpoint did not list its models within {MODELS_LIST_SECS:g} s"
        except AstroError as exc:
            warning = f"could not list the endpoint's models: {exc}"
        current = self.current_model(owner)
        models = unique([current, *available]) if available else unique([current, *configured])
        models = [m for m in models if m == current or self.model_allowed(m)]  # the picker offers what may be picked
        return {
            "current": current,
            "models": models,
            "configured": configured,
            "source": "endpoint" if available else "config",
            "warning": warning,
        }

    async def endpoint_models(self) -> list[str]:
        """The endpoint's model list within ``MODELS_LIST_SECS`` (``asyncio.TimeoutError`` past it)."""
        return list(await asyncio.wait_for(self._llm().list_models(), timeout=MODELS_LIST_SECS))

    def current_model(self, owner: str) -> str:
        """The model ``owner``'s next run uses: its own choice, else the server's current model."""
        return self._owner_models.get(owner) or str(self._llm().model)

    async def switch_model(self, owner: str, model: Any) -> dict[str, Any]:
        """Switch ``owner``'s model only (another user's runs keep theirs); not persisted."""
        name = self.check_allowed_model(await self.check_model(model))
        previous = self.current_model(owner)
        self._owner_models[owner] = name
        return {"current": name, "previous": previous}

    async def check_model(self, model: Any) -> str:
        """``model`` when the endpoint lists it; ``InvalidRequest`` naming the models it does list
        otherwise (a name it does not know would only fail at the next prompt, with a 404). When the
        endpoint cannot be asked, or lists nothing, the name is taken as given."""
        if not isinstance(model, str) or not model.strip() or len(model) > MODEL_NAME_MAX:
            raise InvalidRequest("'model' must be a non-empty model name", reason="invalid_model")
        name = model.strip()
        try:
            available = await self.endpoint_models()
        except (asyncio.TimeoutError, AstroError):
            return name
        if available and name not in available:
            shown = ", ".join(available[:MODELS_SHOWN]) + (f" and {len(available) - MODELS_SHOWN} more"
                                                          if len(available) > MODELS_SHOWN else "")
            raise InvalidRequest(f"the LLM endpoint has no model named {name!r}; it lists: {shown}", reason="unknown_model")
        return name

    def model_allowed(self, name: str) -> bool:
        """May a user pick ``name``? Any model when ``allowed_models`` is empty; the configured ones
        (the administrator's own choice) always."""
        patterns = self.config.allowed_models
        cfg = self.config
        return (not patterns or name in (cfg.llm_model, cfg.llm_fallback_model, *cfg.llm_fallback_chain)
                or any(fnmatchcase(name, p) for p in patterns))

    def check_allowed_model(self, model: Any) -> str:
        """``model`` (stripped) if a user may pick it, else ``ModelNotAllowed`` naming the ones they may."""
        name = model.strip() if isinstance(model, str) else model
        if not isinstance(name, str) or not name or len(name) > MODEL_NAME_MAX:
            raise InvalidRequest("'model' must be a non-empty model name", reason="invalid_model")
        if not self.model_allowed(name):
            allowed = ", ".join(unique([self.config.llm_model, *self.config.allowed_models]))
            raise ModelNotAllowed(f"the model {name!r} is not allowed on this server; you may pick: {allowed} "
                                  "(set by the administrator: AstroConfig.allowed_models)")
        return name
