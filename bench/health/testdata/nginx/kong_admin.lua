-- A Kong-shaped Admin API for the health poller's two paths, served by the
-- same nginx workers as the proxy (bench/health, TestGatewayCost). Like
-- Kong's admin router it builds each answer as Lua tables and encodes it
-- with cjson per request; Kong also pages a database or cache and runs its
-- router and plugins, so this is a lower bound on what an answer costs.
--
--   GET /upstreams?size=N[&offset=O]     a page of full upstream entities
--   GET /upstreams/{id}/health[?size=N]  the upstream's targets and addresses
--
-- Shapes as docs/gateways.md §1b: data, offset (opaque), next (a path, or
-- null on the last page), node_id.

local cjson = require "cjson"

local _M = {}

local NODE_ID = "cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"
local upstreams, by_id, targets_per = {}, {}, 2

local function status_list(...)
  local t = {...}
  return setmetatable(t, cjson.array_mt)
end

-- init builds n upstreams of per targets each (every target one address).
function _M.init(n, per)
  targets_per = per
  for i = 0, n - 1 do
    local name = string.format("upstream-%05d", i)
    local u = {
      id = "id-" .. name, name = name, algorithm = "round-robin",
      hash_on = "none", hash_fallback = "none", hash_on_header = cjson.null, hash_fallback_header = cjson.null,
      hash_on_cookie = cjson.null, hash_on_cookie_path = "/", hash_on_query_arg = cjson.null,
      hash_fallback_query_arg = cjson.null, hash_on_uri_capture = cjson.null, hash_fallback_uri_capture = cjson.null,
      slots = 10000,
      healthchecks = {
        active = {
          type = "http", timeout = 1, concurrency = 10, http_path = "/", https_verify_certificate = true,
          https_sni = cjson.null, headers = cjson.null,
          healthy = { interval = 0, successes = 0, http_statuses = status_list(200, 302) },
          unhealthy = { interval = 0, http_failures = 0, tcp_failures = 0, timeouts = 0,
                        http_statuses = status_list(429, 404, 500, 501, 502, 503, 504, 505) },
        },
        passive = {
          type = "http",
          healthy = { successes = 0, http_statuses = status_list(200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
                                                                 300, 301, 302, 303, 304, 305, 306, 307, 308) },
          unhealthy = { http_failures = 0, tcp_failures = 0, timeouts = 0, http_statuses = status_list(429, 500, 503) },
        },
        threshold = 0,
      },
      tags = cjson.null, host_header = cjson.null, client_certificate = cjson.null, use_srv_name = false,
      created_at = 1700000000, updated_at = 1700000000,
      _index = i,
    }
    upstreams[i + 1] = u
    by_id[u.id] = u
  end
end

local function page_size()
  local size = tonumber(ngx.var.arg_size) or 100 -- Kong's default page size
  if size < 1 or size > 1000 then size = 100 end
  return size
end

local function send(body)
  ngx.header["Content-Type"] = "application/json; charset=utf-8"
  ngx.print(cjson.encode(body))
end

-- GET /upstreams
function _M.list()
  local size = page_size()
  local offset = 0
  if ngx.var.arg_offset then
    offset = tonumber(ngx.decode_base64(ngx.unescape_uri(ngx.var.arg_offset)) or "") or 0
  end
  local data = {}
  local last = math.min(offset + size, #upstreams)
  for i = offset + 1, last do
    local u = upstreams[i]
    local e = {}
    for k, v in pairs(u) do if k ~= "_index" then e[k] = v end end
    data[#data + 1] = e
  end
  local body = { data = setmetatable(data, cjson.array_mt), node_id = NODE_ID, next = cjson.null }
  if last < #upstreams then
    local off = ngx.encode_base64(tostring(last))
    body.offset = off
    body.next = "/upstreams?offset=" .. ngx.escape_uri(off) .. "&size=" .. size
  end
  send(body)
end

-- GET /upstreams/{id}/health
function _M.health(id)
  local u = by_id[id]
  if not u then
    ngx.status = 404
    send({ message = "Not found" })
    return
  end
  local data = {}
  for j = 0, targets_per - 1 do
    local k = u._index * targets_per + j
    local ip = string.format("10.%d.%d.%d", math.floor(k / 65536) % 256, math.floor(k / 256) % 256, k % 256)
    data[#data + 1] = {
      id = string.format("t-%d-%d", u._index, j), target = ip .. ":8000", weight = 100, health = "HEALTHY",
      created_at = 1700000000.123, updated_at = 1700000000.123, upstream = { id = u.id }, tags = cjson.null,
      data = {
        host = ip, port = 8000, dns = "A", nodeWeight = 100,
        weight = { total = 100, unavailable = 0, available = 100 },
        addresses = { { ip = ip, port = 8000, weight = 100, health = "HEALTHY" } },
      },
    }
  end
  send({ data = setmetatable(data, cjson.array_mt), next = cjson.null, node_id = NODE_ID })
end

return _M
