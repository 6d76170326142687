"""herald's plugin host (protocol herald-plugin/1, herald spec middleware.md B2).

herald starts this program when an enabled plugin is a Python plugin. It imports the
plugins, calls their `register(ctx)`, and runs their middleware and hook callbacks when
herald asks, over JSON-RPC 2.0, one message per line: herald -> host on stdin, host ->
herald on the real stdout. Python's stdout goes to stderr (which herald logs), so a
stray print cannot corrupt the protocol.
"""

import asyncio
import copy
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import re
import sys
import threading
import traceback
import types
from concurrent.futures import ThreadPoolExecutor

PROTOCOL = "herald-plugin/1"
HOST_VERSION = "0.1.0"
TELEMETRY_SCHEMA_VERSION = "hermes.observer.v1"
ENTRY_POINT_GROUP = "hermes_agent.plugins"
KINDS = ("llm_request", "llm_execution", "tool_request", "tool_execution")

# The protocol owns the real stdout; everything else printed goes to stderr.
_proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                    format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger("herald.plugin_host")

_write_lock = threading.Lock()
_max_message = 64 * 1024 * 1024


def send(message):
    line = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    if len(line) > _max_message:
        message = {"jsonrpc": "2.0", "id": message.get("id"),
                   "error": {"code": -32001, "message": "callback raised",
                             "data": {"type": "ValueError",
                                      "message": "the answer is larger than max_message_bytes",
                                      "traceback": "", "downstream_ref": None}}}
        line = json.dumps(message, separators=(",", ":"))
    with _write_lock:
        _proto.write(line + "\n")
        _proto.flush()


# ---------------------------------------------------------------- herald module

herald = types.ModuleType("herald")


class DownstreamError(Exception):
    """What ran after `next_call` failed; re-raise it to let herald's error through."""

    def __init__(self, data):
        super().__init__(data.get("message") or "the downstream call failed")
        self.ref = data.get("downstream_ref")
        self.error_type = data.get("error_type")
        self.message = data.get("message")
        self.status_code = data.get("status_code")
        self.retryable = data.get("retryable")


class MiddlewareBlocked(Exception):
    """Raised by an execution middleware to stop the call on purpose (both kinds)."""

    def __init__(self, reason="", metadata=None):
        super().__init__(reason)
        self.reason = reason
        self.metadata = metadata or {}


class PluginToolOverrideError(Exception):
    """A plugin asked to replace a built-in tool without the operator's leave."""


class FrameExpired(BaseException):
    """herald already gave up on this middleware call."""


class Cancelled(BaseException):
    """The run was interrupted."""


herald.DownstreamError = DownstreamError
herald.MiddlewareBlocked = MiddlewareBlocked
herald.FrameExpired = FrameExpired
herald.Cancelled = Cancelled
sys.modules["herald"] = herald


# ------------------------------------------------------ hermes_cli compatibility

def _install_shim():
    """A minimal `hermes_cli` (middleware constants, VALID_HOOKS) unless a real one
    is importable."""
    try:
        if importlib.util.find_spec("hermes_cli") is not None:
            return False
    except (ImportError, ValueError):
        pass
    package = types.ModuleType("hermes_cli")
    package.__path__ = []
    middleware = types.ModuleType("hermes_cli.middleware")
    middleware.OBSERVER_SCHEMA_VERSION = TELEMETRY_SCHEMA_VERSION
    middleware.MIDDLEWARE_SCHEMA_VERSION = "hermes.middleware.v1"
    middleware.TOOL_REQUEST_MIDDLEWARE = "tool_request"
    middleware.TOOL_EXECUTION_MIDDLEWARE = "tool_execution"
    middleware.LLM_REQUEST_MIDDLEWARE = "llm_request"
    middleware.LLM_EXECUTION_MIDDLEWARE = "llm_execution"
    middleware.API_REQUEST_MIDDLEWARE = "llm_request"
    middleware.API_EXECUTION_MIDDLEWARE = "llm_execution"
    middleware.VALID_MIDDLEWARE = set(KINDS)

    class LLMExecutionBlocked(Exception):
        def __init__(self, reason="", metadata=None):
            super().__init__(reason)
            self.reason = reason
            self.metadata = metadata or {}

    middleware.LLMExecutionBlocked = LLMExecutionBlocked
    plugins = types.ModuleType("hermes_cli.plugins")
    plugins.VALID_HOOKS = {
        "pre_tool_call", "post_tool_call", "transform_terminal_output",
        "transform_tool_result", "transform_llm_output", "pre_llm_call", "post_llm_call",
        "pre_verify", "pre_api_request", "post_api_request", "api_request_error",
        "on_session_start", "on_session_end", "on_session_finalize", "on_session_reset",
        "subagent_start", "subagent_stop", "pre_gateway_dispatch",
        "pre_approval_request", "post_approval_response",
    }
    package.middleware = middleware
    package.plugins = plugins
    sys.modules["hermes_cli"] = package
    sys.modules["hermes_cli.middleware"] = middleware
    sys.modules["hermes_cli.plugins"] = plugins
    return True


# ---------------------------------------------------------------- values

class AttrMap(dict):
    """A response both `resp.choices[0].message.content` and `resp["choices"]` read and
    write: nested values are converted once, so an edit in place is kept."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = _attr(value)

    def __delattr__(self, name):
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None


def _attr(value):
    if isinstance(value, AttrMap):
        return value
    if isinstance(value, dict):
        return AttrMap({k: _attr(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_attr(v) for v in value]
    return value


class NotJson(Exception):
    pass


def plain(value, depth=0):
    """A returned value as JSON: dicts, lists and scalars as they are; `model_dump()`;
    namespaces and attribute maps as their dicts; anything else is not a valid shape."""
    if depth > 64:
        raise NotJson("the value is nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain(dump(), depth + 1)
    if isinstance(value, types.SimpleNamespace):
        return plain(vars(value), depth + 1)
    raise NotJson(f"a {type(value).__name__} is not a JSON value")


# ---------------------------------------------------------------- callbacks

class Callback:
    def __init__(self, callback_id, fn, plugin):
        self.id = callback_id
        self.fn = fn
        self.plugin = plugin
        try:
            sig = inspect.signature(fn)
            self.var_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
            self.params = [name for name, p in sig.parameters.items()
                           if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        except (TypeError, ValueError):
            self.var_kwargs, self.params = True, []

    def describe(self):
        return {"module": getattr(self.fn, "__module__", None),
                "qualname": getattr(self.fn, "__qualname__", repr(self.fn)),
                "var_kwargs": self.var_kwargs, "params": self.params}

    def call(self, fields):
        """Calls with every field, or only the names it declares (B2.7)."""
        kwargs = fields if self.var_kwargs else {k: v for k, v in fields.items() if k in self.params}
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run_coroutine_threadsafe(_awaited(result), _loop()).result()
        return result


async def _awaited(awaitable):
    return await awaitable


_loop_holder = {}
_loop_lock = threading.Lock()


def _loop():
    """The host's own event loop thread, for `async def` callbacks."""
    with _loop_lock:
        loop = _loop_holder.get("loop")
        if loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="plugin-async", daemon=True).start()
            _loop_holder["loop"] = loop
        return loop


_callbacks = {}
_next_callback = [0]


def _register(fn, plugin):
    _next_callback[0] += 1
    cb = Callback(f"c{_next_callback[0]}", fn, plugin)
    _callbacks[cb.id] = cb
    return cb


class PluginContext:
    """What `register(ctx)` gets: middleware and hooks are registered; every other
    Hermes ctx method is recorded as unsupported with a warning."""

    def __init__(self, key, manifest, settings):
        self.plugin_id = key
        self.manifest = types.SimpleNamespace(**manifest)
        self.profile_name = os.environ.get("HERMES_PROFILE", "default")
        self._settings = dict(settings or {})
        self._pending = []

    def register_middleware(self, kind, callback):
        if kind not in KINDS:
            log.warning("Plugin '%s' registered unknown middleware '%s'", self.plugin_id, kind)
        self._pending.append(("middleware", kind, callback))

    def register_hook(self, hook_name, callback):
        self._pending.append(("hook", hook_name, callback))

    def register_skill(self, name, path, description=""):
        """As Hermes's ctx.register_skill: loadable as `<plugin>:<name>`."""
        if ":" in str(name):
            raise ValueError(f"Skill name '{name}' must not contain ':' (the namespace is "
                             f"derived from the plugin name automatically).")
        if not name or not re.fullmatch(r"[a-zA-Z0-9_-]+", str(name)):
            raise ValueError(f"Invalid skill name '{name}'. Must match [a-zA-Z0-9_-]+.")
        if not os.path.exists(str(path)):
            raise FileNotFoundError(f"SKILL.md not found at {path}")
        plugin = getattr(self.manifest, "name", None) or self.plugin_id
        self._pending.append(("skill", {"name": f"{plugin}:{name}", "path": os.path.abspath(str(path)),
                                        "description": str(description or "")}, None))

    def register_tool(self, name, toolset, schema, handler, check_fn=None, requires_env=None,
                      is_async=False, description="", emoji="", override=False):
        """As Hermes's ctx.register_tool: replacing a built-in needs `override` and the
        operator's `plugins.entries.<id>.allow_tool_override: true`."""
        if override and not self._settings.get("allow_tool_override"):
            raise PluginToolOverrideError(
                f"Plugin {self.plugin_id!r} cannot override built-in tool {name!r}. Set "
                f"plugins.entries.{self.plugin_id}.allow_tool_override: true in config.yaml "
                f"to allow this plugin to replace built-in tools.")
        if not callable(handler):
            raise TypeError(f"the handler of tool {name!r} is not callable")
        tool = {"name": str(name), "toolset": str(toolset), "schema": plain(schema or {}),
                "description": str(description or ""), "emoji": str(emoji or ""),
                "requires_env": [str(v) for v in (requires_env or [])],
                "override": bool(override), "is_async": bool(is_async)}
        self._pending.append(("tool", tool, (handler, check_fn)))

    def get_config(self, key=None, default=None):
        if key is None:
            return dict(self._settings)
        return self._settings.get(key, default)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unsupported(*args, **kwargs):
            log.warning("Plugin '%s' called ctx.%s, which herald does not support; ignored",
                        self.plugin_id, name)
            self._pending.append(("unsupported", name, None))
        return unsupported

    def commit(self, seq_start):
        registrations = []
        for seq, (what, name, fn) in enumerate(self._pending, start=seq_start):
            if what == "unsupported":
                registrations.append({"seq": seq, "type": "unsupported", "api": name,
                                      "detail": "ignored"})
                continue
            if what == "skill":
                registrations.append(dict(name, seq=seq, type="skill"))
                continue
            if what == "tool":
                handler, check_fn = fn
                cb = _register(handler, self.plugin_id)
                entry = dict(name, seq=seq, type="tool", callback_id=cb.id,
                             callback=cb.describe(), check_callback_id=None)
                if check_fn is not None:
                    check = _register(check_fn, self.plugin_id)
                    entry["check_callback_id"] = check.id
                registrations.append(entry)
                continue
            cb = _register(fn, self.plugin_id)
            entry = {"seq": seq, "type": what, "callback_id": cb.id, "callback": cb.describe()}
            entry["kind" if what == "middleware" else "hook"] = name
            registrations.append(entry)
        return registrations


def _module_name(key):
    return "hermes_plugins." + key.replace("/", "__").replace("-", "_")


def _import_plugin(plugin):
    entry_point = plugin.get("entry_point")
    if entry_point:
        found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                 if ep.name == entry_point]
        if not found:
            raise ImportError(f"no entry point {entry_point!r} in group {ENTRY_POINT_GROUP}")
        return found[0].load()
    if "hermes_plugins" not in sys.modules:
        namespace = types.ModuleType("hermes_plugins")
        namespace.__path__ = []
        sys.modules["hermes_plugins"] = namespace
    name = _module_name(plugin["key"])
    path = plugin["path"]
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(path, "__init__.py"), submodule_search_locations=[path])
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _load(plugin, seq):
    key = plugin["key"]
    try:
        module = _import_plugin(plugin)
        register = getattr(module, "register", None)
        if not callable(register):
            raise AttributeError("the plugin has no register(ctx) function")
        ctx = PluginContext(key, plugin.get("manifest") or {}, plugin.get("settings"))
        register(ctx)
        return {"key": key, "loaded": True, "error": None, "registrations": ctx.commit(seq)}
    except BaseException as exc:  # a plugin that fails to load never takes the host down
        if isinstance(exc, (KeyboardInterrupt,)):
            raise
        log.warning("Plugin '%s' failed to load: %s: %s", key, type(exc).__name__, exc)
        return {"key": key, "loaded": False, "error": f"{type(exc).__name__}: {exc}",
                "registrations": []}


# ---------------------------------------------------------------- requests to herald

_pending = {}
_pending_lock = threading.Lock()
_next_request = [0]


def ask_herald(method, params):
    with _pending_lock:
        _next_request[0] += 1
        request_id = f"p{_next_request[0]}"
        waiter = {"event": threading.Event(), "answer": None}
        _pending[request_id] = waiter
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    waiter["event"].wait()
    return waiter["answer"]


def _answered(message):
    with _pending_lock:
        waiter = _pending.pop(message.get("id"), None)
    if waiter is not None:
        waiter["answer"] = message
        waiter["event"].set()


# ---------------------------------------------------------------- invocations

class Frame:
    def __init__(self, frame_id, kind):
        self.id = frame_id
        self.kind = kind
        self.used = False
        self.raised = None


_frames = {}


def _next_call_for(frame):
    def next_call(payload=None):
        if frame.used:
            raise RuntimeError("next_call is single-use for this callback; "
                               "the downstream call runs at most once")
        frame.used = True
        answer = ask_herald("middleware.next", {"frame_id": frame.id, "payload": plain(payload)})
        error = answer.get("error")
        if error is None:
            value = (answer.get("result") or {}).get("value")
            return _attr(value) if frame.kind == "llm_execution" else value
        code, data = error.get("code"), error.get("data") or {}
        if code == -32010:
            frame.raised = DownstreamError(data)
            raise frame.raised
        if code == -32011:
            raise RuntimeError("next_call is single-use for this callback")
        if code == -32013:
            raise Cancelled(error.get("message"))
        raise FrameExpired(error.get("message"))
    return next_call


def _with_originals(fields, key):
    if fields.pop("original_same", False) and key in fields:
        fields["original_" + key] = copy.deepcopy(fields[key])
    return fields


def _raised(exc, frame=None):
    blocked = (MiddlewareBlocked,) + tuple(
        b for b in [getattr(sys.modules.get("hermes_cli.middleware"), "LLMExecutionBlocked", None)]
        if isinstance(b, type))
    if isinstance(exc, blocked):
        return {"code": -32004, "message": "blocked",
                "data": {"reason": getattr(exc, "reason", str(exc)),
                         "metadata": plain(getattr(exc, "metadata", {}) or {})}}
    ref = None
    if frame is not None and frame.raised is not None:
        if exc is frame.raised or getattr(exc, "ref", None) == frame.raised.ref:
            ref = frame.raised.ref
    return {"code": -32001, "message": "callback raised",
            "data": {"type": type(exc).__name__, "message": str(exc)[:2000],
                     "traceback": traceback.format_exc()[-8000:], "downstream_ref": ref}}


def _invoke(method, params, opened):
    """Calls the callback; an execution frame is put in `opened` first, so that a
    failure raised through it can still be matched to herald's downstream error."""
    cb = _callbacks.get(params.get("callback_id"))
    if cb is None:
        raise LookupError(f"no callback {params.get('callback_id')}")
    fields = dict(params.get("fields") or {})
    if method == "middleware.execute":
        kind = params.get("kind")
        key = "request" if kind == "llm_execution" else "args"
        frame = Frame(params.get("frame_id"), kind)
        _frames[frame.id] = frame
        opened.append(frame)
        try:
            fields = _with_originals(fields, key)
            fields["next_call"] = _next_call_for(frame)
            return cb.call(fields)
        finally:
            _frames.pop(frame.id, None)
    if method == "tool.invoke":
        context = params.get("context") or {}
        result = cb.fn(params.get("args") or {}, task_id=context.get("task_id"),
                       session_id=context.get("session_id"))
        if inspect.isawaitable(result):
            result = asyncio.run_coroutine_threadsafe(_awaited(result), _loop()).result()
        return result if isinstance(result, str) else json.dumps(plain(result))
    if method == "tool.check":
        return bool(cb.fn())
    if method == "middleware.request":
        key = "request" if params.get("kind") == "llm_request" else "args"
        return cb.call(_with_originals(fields, key))
    # Every hook call carries it, as Hermes's invoke_hook adds it.
    fields.setdefault("telemetry_schema_version", TELEMETRY_SCHEMA_VERSION)
    # Hermes passes the SDK's message object: attributes, still readable as keys.
    if isinstance(fields.get("assistant_message"), dict):
        fields["assistant_message"] = _attrs(fields["assistant_message"])
    return cb.call(fields)


class Attrs(dict):
    """A mapping whose keys read as attributes too (where Hermes passes objects)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _attrs(value):
    if isinstance(value, dict):
        return Attrs({k: _attrs(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_attrs(v) for v in value]
    return value


def _handle(message):
    request_id, method = message.get("id"), message.get("method")
    opened = []
    try:
        value = _invoke(method, message.get("params") or {}, opened)
        send({"jsonrpc": "2.0", "id": request_id, "result": {"value": plain(value)}})
    except BaseException as exc:  # every failure goes back to herald, fail-open there
        if isinstance(exc, NotJson):
            exc = ValueError(f"returned {exc}")
        frame = opened[0] if opened else None
        send({"jsonrpc": "2.0", "id": request_id, "error": _raised(exc, frame)})


def _initialize(params):
    global _max_message
    if params.get("protocol") != PROTOCOL:
        raise ValueError(f"protocol {params.get('protocol')!r}, this host speaks {PROTOCOL}")
    limits = params.get("limits") or {}
    _max_message = int(limits.get("max_message_bytes") or _max_message)
    if params.get("hermes_home"):
        os.environ.setdefault("HERMES_HOME", params["hermes_home"])
    shimmed = _install_shim()
    results, seq = [], 0
    for plugin in params.get("plugins") or []:
        loaded = _load(plugin, seq)
        seq += len(loaded["registrations"])
        results.append(loaded)
    return {"protocol": PROTOCOL, "host_version": HOST_VERSION,
            "python": ".".join(map(str, sys.version_info[:3])),
            "hermes_cli": "shim" if shimmed else "installed", "plugins": results}


def main():
    pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="plugin-call")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            log.warning("herald sent a line that is not JSON; ignored")
            continue
        method = message.get("method")
        if method is None:
            _answered(message)
        elif method == "initialize":
            try:
                pool = ThreadPoolExecutor(
                    max_workers=int(((message.get("params") or {}).get("limits") or {})
                                    .get("max_concurrency") or 32),
                    thread_name_prefix="plugin-call")
                result = _initialize(message.get("params") or {})
                send({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
            except Exception as exc:
                send({"jsonrpc": "2.0", "id": message.get("id"),
                      "error": {"code": -32002, "message": str(exc)}})
        elif method == "$/ping":
            send({"jsonrpc": "2.0", "id": message.get("id"), "result": {}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": message.get("id"), "result": {}})
        elif method == "exit":
            break
        elif method == "frame.cancel":
            continue
        else:
            pool.submit(_handle, message)
    os._exit(0)


if __name__ == "__main__":
    main()
