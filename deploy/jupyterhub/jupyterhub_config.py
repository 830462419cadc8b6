"""astro-jupyter on a JupyterHub: the settings every user's server gets (docs/jupyterhub.md).

Load it from your own ``jupyterhub_config.py`` (which keeps your authenticator and spawner)::

    load_subconfig("/path/to/astro-jupyter/deploy/jupyterhub/jupyterhub_config.py")

Hub-wide settings are read from the hub's own environment when the hub starts and handed to
every single-user server through ``c.Spawner.environment``, where ``AstroConfig`` reads them
(each setting's environment variable is named in its help). Nothing here is per user, so a user
has nothing to configure; the one per-user secret, the NASA ADS token, comes from the user's
``auth_state`` (``ads_token``) or, failing that, from the user's own configuration.

Every user can read the environment of their own server: a key set here (OPENAI_API_KEY) is
visible to all users. Give them a key for a gateway that meters per user, not a master key.
"""

import os

c = get_config()  # noqa: F821 - defined by JupyterHub when it loads a config file

# The variables handed to every user's server, unchanged, when the hub's environment has them.
HUB_WIDE = (
    "OPENAI_BASE_URL",  # the OpenAI-compatible endpoint (vLLM, Ollama, a LiteLLM gateway, OpenAI)
    "OPENAI_API_KEY",  # its key (see the warning above)
    "LLM_MODEL",  # the default chat model
    "LLM_FALLBACK_MODEL",  # switched to after repeated overload answers
    "LLM_FALLBACK_CHAIN",
    "ASTRO_EMBED_MODEL",  # the embedding model; shared libraries need one model for everyone
    "ASTRO_ALLOWED_MODELS",  # models users may pick, names or globs, comma-separated (AstroConfig.allowed_models)
    "ASTRO_MAX_RUNS_PER_USER",  # runs one user may have going at once (AstroConfig.max_runs_per_user)
    "ASTRO_MAX_STEPS",  # LLM turns per run
    "ASTRO_PERMISSION_MODE",  # auto | ask | deny
    "ASTRO_PERMISSION_RULES",  # JSON list of {"action", "tool", "reason"}; deny rules bind every user
    "ASTRO_SHARED_LIBRARY_URL",  # postgresql://... the department's shared paper library
    "ASTRO_SHARED_LIBRARY_DIR",  # where the shared library's PDFs live (a shared file system)
    "ASTRO_ADS_URL",  # service base URLs, e.g. an institutional mirror
    "ASTRO_ARXIV_URL",
    "ASTRO_SESAME_URL",
)

# Never hub-wide: a personal secret in c.Spawner.environment would reach every user.
PER_USER_SECRETS = {"ads_token": "ADS_API_TOKEN"}  # auth_state key -> the variable the server reads

c.Spawner.environment.update({name: os.environ[name] for name in HUB_WIDE if os.environ.get(name)})


def astro_auth_state_hook(spawner, auth_state):
    """Copy the user's own secrets from their ``auth_state`` (set by the authenticator's
    ``post_auth_hook`` or by an admin through the REST API) into that user's server only."""
    environment = dict(spawner.environment)  # a copy: never a dict another user's spawner could share
    for key, variable in PER_USER_SECRETS.items():
        value = (auth_state or {}).get(key)
        if isinstance(value, str) and value.strip():
            environment[variable] = value.strip()
        else:  # a token removed from auth_state does not linger from an earlier spawn
            environment.pop(variable, None)
    spawner.environment = environment


c.Spawner.auth_state_hook = astro_auth_state_hook

# auth_state is stored encrypted; JupyterHub needs JUPYTERHUB_CRYPT_KEY (`openssl rand -hex 32`) for it.
# Without the key the hub still starts: users then set their ADS token in their own configuration.
if os.environ.get("JUPYTERHUB_CRYPT_KEY"):
    c.Authenticator.enable_auth_state = True
