/*
** lua_patterns.c -- string.find, match, gmatch and gsub for the template
** sandbox: Lua 5.4's pattern language with every matching step charged to
** the render's work budget (Lua's own functions backtrack without bound in
** C, where the count hook cannot stop them).
*/
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lua_patterns.h"

/* ---- Pattern matching with a step count ----------------------------------
** Lua 5.4's pattern language, implemented here so that every step is
** counted: single characters and classes (%a %c %d %g %l %p %s %u %w %x %z,
** upper case complements), sets [...] and [^...], quantifiers * + - ?,
** captures ( ) and position captures (), back references %1-%9, %bxy,
** %f[set], anchors ^ and $. Subjects and patterns are Lua strings, so the
** byte at their end is a readable NUL, as the language's definition of
** %f and %b at the end of the subject assumes. */

#define PM_MAXDEPTH 200      /* recursion depth, as Lua's MAXCCALLS */
#define PM_MAXCAPTURES 32    /* as Lua's LUA_MAXCAPTURES */
#define PM_FLUSH 4096    /* steps between charges */
#define PM_SPECIALS "^$*+?.([%-"
#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)
#define UCHAR(c) ((unsigned char)(c))

typedef struct {
  const char *src, *src_end, *pat_end;
  lua_State *L;
  int depth;
  int level;
  uint64_t steps; /* not yet charged */
  struct {
    const char *init;
    ptrdiff_t len;
  } cap[PM_MAXCAPTURES];
} pm_state;

static void pm_flush(pm_state *ms) {
  uint64_t s = ms->steps;
  ms->steps = 0;
  if (s) collgen__lua_charge(ms->L, s);
}

static void pm_step(pm_state *ms, uint64_t n) {
  ms->steps += n;
  if (ms->steps >= PM_FLUSH) pm_flush(ms);
}

static void pm_init(pm_state *ms, lua_State *L, const char *s, size_t ls, const char *p,
                    size_t lp) {
  ms->L = L;
  ms->src = s;
  ms->src_end = s + ls;
  ms->pat_end = p + lp;
  ms->steps = 0;
  ms->level = 0;
  ms->depth = PM_MAXDEPTH;
}

static int pm_class(int c, int cl) {
  int r;
  switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break; /* deprecated, still in Lua 5.4 */
    default: return cl == c;
  }
  return isupper(cl) ? !r : r;
}

/* The end of the single-character class starting at p. */
static const char *pm_class_end(pm_state *ms, const char *p) {
  char c = *p++;
  if (c == '%') {
    if (p >= ms->pat_end) luaL_error(ms->L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (*p == '^') p++;
    do { /* the first ']' is a member, not the end */
      if (p >= ms->pat_end) luaL_error(ms->L, "malformed pattern (missing ']')");
      c = *p++;
      if (c == '%' && p < ms->pat_end) p++;
    } while (*p != ']');
    return p + 1;
  }
  return p;
}

/* c in the set [p, ec] (p at '[', ec at its ']')? */
static int pm_set(int c, const char *p, const char *ec) {
  int in = 1;
  if (p[1] == '^') {
    in = 0;
    p++;
  }
  while (++p < ec) {
    if (*p == '%') {
      p++;
      if (pm_class(c, UCHAR(*p))) return in;
    } else if (p[1] == '-' && p + 2 < ec) {
      p += 2;
      if (UCHAR(p[-2]) <= c && c <= UCHAR(*p)) return in;
    } else if (UCHAR(*p) == c) {
      return in;
    }
  }
  return !in;
}

static int pm_single(pm_state *ms, const char *s, const char *p, const char *ep) {
  if (s >= ms->src_end) return 0;
  int c = UCHAR(*s);
  switch (*p) {
    case '.': return 1;
    case '%': return pm_class(c, UCHAR(p[1]));
    case '[': return pm_set(c, p, ep - 1);
    default: return UCHAR(*p) == c;
  }
}

static const char *pm_match(pm_state *ms, const char *s, const char *p);

static const char *pm_balance(pm_state *ms, const char *s, const char *p) {
  if (p >= ms->pat_end - 1)
    luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
  if (*s != *p) return NULL;
  const char *start = s;
  int open = *p, close = p[1], depth = 1;
  while (++s < ms->src_end) {
    if (*s == close) {
      if (--depth == 0) {
        pm_step(ms, 1 + (uint64_t)(s - start) / COLLGEN_LUA_BYTES_PER_UNIT);
        return s + 1;
      }
    } else if (*s == open) {
      depth++;
    }
  }
  pm_step(ms, 1 + (uint64_t)(s - start) / COLLGEN_LUA_BYTES_PER_UNIT);
  return NULL;
}

static const char *pm_max_expand(pm_state *ms, const char *s, const char *p, const char *ep) {
  ptrdiff_t i = 0;
  while (pm_single(ms, s + i, p, ep)) i++;
  pm_step(ms, (uint64_t)i);
  for (; i >= 0; i--) {
    const char *r = pm_match(ms, s + i, ep + 1);
    if (r) return r;
  }
  return NULL;
}

static const char *pm_min_expand(pm_state *ms, const char *s, const char *p, const char *ep) {
  for (;;) {
    const char *r = pm_match(ms, s, ep + 1);
    if (r) return r;
    if (!pm_single(ms, s, p, ep)) return NULL;
    s++;
  }
}

static const char *pm_start_capture(pm_state *ms, const char *s, const char *p, int what) {
  if (ms->level >= PM_MAXCAPTURES) luaL_error(ms->L, "too many captures");
  ms->cap[ms->level].init = s;
  ms->cap[ms->level].len = what;
  ms->level++;
  const char *r = pm_match(ms, s, p);
  if (!r) ms->level--;
  return r;
}

static const char *pm_end_capture(pm_state *ms, const char *s, const char *p) {
  int l = ms->level - 1;
  while (l >= 0 && ms->cap[l].len != CAP_UNFINISHED) l--;
  if (l < 0) luaL_error(ms->L, "invalid pattern capture");
  ms->cap[l].len = s - ms->cap[l].init;
  const char *r = pm_match(ms, s, p);
  if (!r) ms->cap[l].len = CAP_UNFINISHED;
  return r;
}

static const char *pm_back_reference(pm_state *ms, const char *s, int digit) {
  int l = digit - '1';
  if (l < 0 || l >= ms->level || ms->cap[l].len == CAP_UNFINISHED)
    luaL_error(ms->L, "invalid capture index %%%d", l + 1);
  ptrdiff_t len = ms->cap[l].len;
  if (len < 0 || ms->src_end - s < len) return NULL; /* a position capture never matches */
  pm_step(ms, (uint64_t)len / COLLGEN_LUA_BYTES_PER_UNIT);
  return memcmp(ms->cap[l].init, s, (size_t)len) == 0 ? s + len : NULL;
}

/* Matches pattern p at s: the end of the match, or NULL. */
static const char *pm_match(pm_state *ms, const char *s, const char *p) {
  if (ms->depth-- == 0) luaL_error(ms->L, "pattern too complex");
  for (;;) {
    pm_step(ms, 1);
    if (p == ms->pat_end) break;
    const char *ep;
    switch (*p) {
      case '(':
        s = p[1] == ')' ? pm_start_capture(ms, s, p + 2, CAP_POSITION)
                        : pm_start_capture(ms, s, p + 1, CAP_UNFINISHED);
        goto done;
      case ')':
        s = pm_end_capture(ms, s, p + 1);
        goto done;
      case '$':
        if (p + 1 != ms->pat_end) goto single;
        s = s == ms->src_end ? s : NULL;
        goto done;
      case '%':
        switch (p[1]) {
          case 'b':
            s = pm_balance(ms, s, p + 2);
            if (!s) goto done;
            p += 4;
            continue;
          case 'f': {
            p += 2;
            if (*p != '[') luaL_error(ms->L, "missing '[' after '%%f' in pattern");
            ep = pm_class_end(ms, p);
            int prev = s == ms->src ? 0 : UCHAR(s[-1]);
            if (!pm_set(prev, p, ep - 1) && pm_set(UCHAR(*s), p, ep - 1)) {
              p = ep;
              continue;
            }
            s = NULL;
            goto done;
          }
          case '0': case '1': case '2': case '3': case '4':
          case '5': case '6': case '7': case '8': case '9':
            s = pm_back_reference(ms, s, UCHAR(p[1]));
            if (!s) goto done;
            p += 2;
            continue;
          default:
            goto single;
        }
      default:
      single:
        ep = pm_class_end(ms, p);
        if (!pm_single(ms, s, p, ep)) {
          if (*ep == '*' || *ep == '?' || *ep == '-') { /* may match zero times */
            p = ep + 1;
            continue;
          }
          s = NULL;
          goto done;
        }
        switch (*ep) {
          case '?': {
            const char *r = pm_match(ms, s + 1, ep + 1);
            if (r) {
              s = r;
              goto done;
            }
            p = ep + 1;
            continue;
          }
          case '+': s = pm_max_expand(ms, s + 1, p, ep); goto done;
          case '*': s = pm_max_expand(ms, s, p, ep); goto done;
          case '-': s = pm_min_expand(ms, s, p, ep); goto done;
          default:
            s++;
            p = ep;
            continue;
        }
    }
  }
done:
  ms->depth++;
  return s;
}

/* Capture i of a match [s, e) (the whole match when there are no
** captures): its length and start, or CAP_POSITION with the position
** pushed. */
static ptrdiff_t pm_capture(pm_state *ms, int i, const char *s, const char *e,
                            const char **cap) {
  if (i >= ms->level) {
    if (i != 0) luaL_error(ms->L, "invalid capture index %%%d", i + 1);
    *cap = s;
    return e - s;
  }
  ptrdiff_t len = ms->cap[i].len;
  *cap = ms->cap[i].init;
  if (len == CAP_UNFINISHED) luaL_error(ms->L, "unfinished capture");
  if (len == CAP_POSITION) lua_pushinteger(ms->L, (ms->cap[i].init - ms->src) + 1);
  return len;
}

static void pm_push_capture(pm_state *ms, int i, const char *s, const char *e) {
  const char *cap;
  ptrdiff_t len = pm_capture(ms, i, s, e, &cap);
  if (len != CAP_POSITION) lua_pushlstring(ms->L, cap, (size_t)len);
}

static int pm_push_captures(pm_state *ms, const char *s, const char *e) {
  int n = ms->level == 0 && s ? 1 : ms->level;
  luaL_checkstack(ms->L, n, "too many captures");
  for (int i = 0; i < n; i++) pm_push_capture(ms, i, s, e);
  return n;
}

/* A 1-based, possibly negative position as a 1-based offset in [1, ...]. */
static size_t pm_position(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0) return 1;
  if (pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static int pm_no_specials(const char *p, size_t lp) {
  for (size_t i = 0; i < lp; i++)
    if (p[i] && memchr(PM_SPECIALS, p[i], sizeof PM_SPECIALS - 1)) return 0;
  return 1;
}

/* The first occurrence of s2 in s1, counting the bytes compared. */
static const char *pm_find_plain(pm_state *ms, const char *s1, size_t l1, const char *s2,
                                 size_t l2) {
  if (l2 == 0) return s1;
  if (l2 > l1) return NULL;
  l2--; /* the first byte is found by memchr */
  l1 -= l2;
  const char *at;
  while (l1 > 0 && (at = memchr(s1, *s2, l1)) != NULL) {
    at++;
    pm_step(ms, 1 + ((uint64_t)(at - s1) + l2) / COLLGEN_LUA_BYTES_PER_UNIT);
    if (memcmp(at, s2 + 1, l2) == 0) return at - 1;
    l1 -= (size_t)(at - s1);
    s1 = at;
  }
  return NULL;
}

static int pm_find_aux(lua_State *L, int find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = pm_position(luaL_optinteger(L, 3, 1), ls) - 1;
  pm_state ms;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || pm_no_specials(p, lp))) {
    pm_init(&ms, L, s, ls, p, lp);
    const char *at = pm_find_plain(&ms, s + init, ls - init, p, lp);
    pm_flush(&ms);
    if (at) {
      lua_pushinteger(L, (at - s) + 1);
      lua_pushinteger(L, (lua_Integer)((size_t)(at - s) + lp));
      return 2;
    }
  } else {
    int anchor = *p == '^';
    if (anchor) {
      p++;
      lp--;
    }
    pm_init(&ms, L, s, ls, p, lp);
    const char *s1 = s + init;
    do {
      ms.level = 0;
      ms.depth = PM_MAXDEPTH;
      const char *e = pm_match(&ms, s1, p);
      if (e) {
        pm_flush(&ms);
        if (find) {
          lua_pushinteger(L, (s1 - s) + 1);
          lua_pushinteger(L, e - s);
          return pm_push_captures(&ms, NULL, NULL) + 2;
        }
        return pm_push_captures(&ms, s1, e);
      }
    } while (s1++ < ms.src_end && !anchor);
    pm_flush(&ms);
  }
  luaL_pushfail(L);
  return 1;
}

int collgen__lua_find(lua_State *L) { return pm_find_aux(L, 1); }
int collgen__lua_match(lua_State *L) { return pm_find_aux(L, 0); }

typedef struct {
  const char *src, *p, *lastmatch;
  pm_state ms;
} pm_gmatch_state;

static int pm_gmatch_next(lua_State *L) {
  pm_gmatch_state *gm = lua_touserdata(L, lua_upvalueindex(3));
  gm->ms.L = L;
  for (const char *src = gm->src; src <= gm->ms.src_end; src++) {
    gm->ms.level = 0;
    gm->ms.depth = PM_MAXDEPTH;
    const char *e = pm_match(&gm->ms, src, gm->p);
    if (e && e != gm->lastmatch) {
      gm->src = gm->lastmatch = e;
      pm_flush(&gm->ms);
      return pm_push_captures(&gm->ms, src, e);
    }
  }
  pm_flush(&gm->ms);
  return 0;
}

int collgen__lua_gmatch(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = pm_position(luaL_optinteger(L, 3, 1), ls) - 1;
  lua_settop(L, 2); /* the closure keeps both strings alive */
  pm_gmatch_state *gm = lua_newuserdatauv(L, sizeof *gm, 0);
  if (init > ls) init = ls + 1; /* past the end: no match */
  pm_init(&gm->ms, L, s, ls, p, lp);
  gm->src = s + init;
  gm->p = p;
  gm->lastmatch = NULL;
  lua_pushcclosure(L, pm_gmatch_next, 3);
  return 1;
}

/* Appends the replacement string (argument 3) with %0-%9 and %%. */
static void pm_add_string(pm_state *ms, luaL_Buffer *b, const char *s, const char *e) {
  lua_State *L = ms->L;
  size_t l;
  const char *news = lua_tolstring(L, 3, &l);
  const char *p;
  while ((p = memchr(news, '%', l)) != NULL) {
    luaL_addlstring(b, news, (size_t)(p - news));
    p++;
    if (*p == '%') {
      luaL_addchar(b, *p);
    } else if (*p == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else if (isdigit(UCHAR(*p))) {
      const char *cap;
      ptrdiff_t len = pm_capture(ms, *p - '1', s, e, &cap);
      if (len == CAP_POSITION) luaL_addvalue(b);
      else luaL_addlstring(b, cap, (size_t)len);
    } else {
      luaL_error(L, "invalid use of '%c' in replacement string", '%');
    }
    l -= (size_t)(p + 1 - news);
    news = p + 1;
  }
  luaL_addlstring(b, news, l);
}

/* Appends the replacement of match [s, e); 1 when it changed the text. */
static int pm_add_value(pm_state *ms, luaL_Buffer *b, const char *s, const char *e, int tr) {
  lua_State *L = ms->L;
  if (tr == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    lua_call(L, pm_push_captures(ms, s, e), 1);
  } else if (tr == LUA_TTABLE) {
    pm_push_capture(ms, 0, s, e);
    lua_gettable(L, 3);
  } else {
    pm_add_string(ms, b, s, e);
    return 1;
  }
  if (!lua_toboolean(L, -1)) { /* nil or false: keep the match */
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return 0;
  }
  if (!lua_isstring(L, -1))
    return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(b);
  return 1;
}

int collgen__lua_gsub(lua_State *L) {
  size_t srcl, lp;
  const char *src = luaL_checklstring(L, 1, &srcl);
  const char *p = luaL_checklstring(L, 2, &lp);
  const char *lastmatch = NULL;
  int tr = lua_type(L, 3);
  lua_Integer max_s = luaL_optinteger(L, 4, (lua_Integer)srcl + 1);
  int anchor = *p == '^';
  lua_Integer n = 0;
  int changed = 0;
  pm_state ms;
  luaL_Buffer b;
  luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION ||
                      tr == LUA_TTABLE, 3, "string/function/table");
  luaL_buffinit(L, &b);
  if (anchor) {
    p++;
    lp--;
  }
  pm_init(&ms, L, src, srcl, p, lp);
  while (n < max_s) {
    ms.level = 0;
    ms.depth = PM_MAXDEPTH;
    const char *e = pm_match(&ms, src, p);
    if (e && e != lastmatch) {
      n++;
      changed = pm_add_value(&ms, &b, src, e, tr) | changed;
      src = lastmatch = e;
    } else if (src < ms.src_end) {
      luaL_addchar(&b, *src++);
    } else {
      break;
    }
    if (anchor) break;
  }
  pm_flush(&ms);
  if (!changed) {
    lua_pushvalue(L, 1);
  } else {
    luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return 2;
}

