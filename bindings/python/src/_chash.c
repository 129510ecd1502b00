/* SPDX-License-Identifier: Apache-2.0 */
/*
 * _chash.c — the CPython extension under the `chash` package: libchash's placement tables as an
 * immutable Python type (Table), its registries and its errors.
 *
 * Invariants of a Table object (set once in table_init_*; never changed afterwards, so a Table
 * may be read from any number of threads):
 *   t      the built ch_table, owned; freed by tp_dealloc only.
 *   n      the table's node count N (>= 1), == len(ids) == len(addrs) == len(names).
 *   ids    tuple of N str: node i's id as the table hashes it (lookups return these objects, so
 *          a lookup allocates nothing).
 *   addrs  tuple of N str: node i's address ("host:port", from a config); the id otherwise.
 *   names  tuple of N (str | None): the server's name in a config; None otherwise.
 *   keyed  the scheme places by the key itself (CH_ALGO_F_KEYED): no walk, no key hash.
 * The GIL is held for every call except the inner loop of a large batch (lookup_many), which
 * reads only the table and a private array of key pointers whose objects a tuple keeps alive.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "chash.h"
#include "chash_config.h"

#include <stdint.h>
#include <string.h>

/* lookup_many() works in chunks of this many keys; a full chunk releases the GIL while it hashes
 * (for fewer keys, the switch costs more than it frees). */
#define BATCH_CHUNK 512
/* replicas(): walks up to this long use a buffer on the stack. */
#define WALK_STACK 64

static PyObject *Error;       /* chash.Error(ValueError): .code, libchash's status */
static PyObject *ConfigError; /* chash.ConfigError(Error): .file, .line, .column */

typedef struct {
    PyObject_HEAD
    ch_table *t;
    size_t n;
    PyObject *ids, *addrs, *names;
    PyObject *version; /* a config pool's "version", else None */
    PyObject *pool;    /* a config pool's name, else None */
    int keyed;
} TableObject;

/* ---- errors --------------------------------------------------------------------------------- */

/* A new cls(message) with .code = status, or NULL with an error. */
static PyObject *new_error(PyObject *cls, int status, const char *message)
{
    PyObject *exc = PyObject_CallFunction(cls, "s", message);
    PyObject *code = exc ? PyLong_FromLong(status) : NULL;
    if (code == NULL || PyObject_SetAttrString(exc, "code", code) < 0) {
        Py_XDECREF(code);
        Py_XDECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    return exc;
}

/* Raises exc (a new reference, or NULL when making it failed). Returns NULL. */
static PyObject *raise_obj(PyObject *exc)
{
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *raise_status(PyObject *cls, int status, const char *message)
{
    return raise_obj(new_error(cls, status, message));
}

/* Raises Error("<what>: <libchash's message>") for a failed libchash call. */
static PyObject *raise_chash(int status, const char *what)
{
    char buf[768];
    snprintf(buf, sizeof(buf), "%s: %s", what, ch_strerror(status));
    return raise_status(Error, status, buf);
}

/* Sets exc.<name> = value (a new reference, consumed). 0, or -1 with an error. */
static int set_attr(PyObject *exc, const char *name, PyObject *value)
{
    int rc = value != NULL ? PyObject_SetAttrString(exc, name, value) : -1;
    Py_XDECREF(value);
    return rc;
}

/* Raises ConfigError from a ch_config_error: "file:line:column: message", and the parts as
 * .file, .line, .column (0 when not known). */
static PyObject *raise_config(int status, const ch_config_error *err)
{
    char buf[1024];
    if (err->line == 0)
        snprintf(buf, sizeof(buf), "%s: %s", err->file, err->message);
    else
        ch_config_error_str(err, buf, sizeof(buf));
    PyObject *exc = new_error(ConfigError, status, buf);
    if (exc == NULL)
        return NULL;
    if (set_attr(exc, "file", PyUnicode_DecodeFSDefault(err->file)) < 0 ||
        set_attr(exc, "line", PyLong_FromUnsignedLong(err->line)) < 0 ||
        set_attr(exc, "column", PyLong_FromUnsignedLong(err->column)) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return raise_obj(exc);
}

/* ---- strings that go to C ------------------------------------------------------------------- */

/* The UTF-8 of a str argument that goes to C as a NUL-terminated string, or NULL with an error:
 * TypeError for another type, Error (CH_EINVAL) naming the argument for a str holding a NUL,
 * which C would read as a shorter string. The bytes live as long as o (CPython caches them). */
static const char *c_string(PyObject *o, const char *what)
{
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(o, &len);
    if (s == NULL)
        return NULL;
    if ((size_t)len != strlen(s)) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "%s holds a NUL character (UTF-8 byte %zu of %zd), which C would read as the "
                 "end of a shorter string",
                 what, strlen(s), len);
        raise_status(Error, CH_EINVAL, msg);
        return NULL;
    }
    return s;
}

/* ---- registries ----------------------------------------------------------------------------- */

/* "a, b, c": every name of a registry, for an error that refuses a name. */
static void names_list(char *buf, size_t len, const char *(*name_of)(unsigned))
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; name_of(i) != NULL && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name_of(i));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static const char *algo_name_u(unsigned i)
{
    return i < CH_ALGO_COUNT_ ? ch_algo_name((ch_algo_id)i) : NULL;
}

static const char *hash_name_u(unsigned i)
{
    return i < CH_HASH_COUNT_ ? ch_hash_name((ch_hash_id)i) : NULL;
}

/* Parses an algorithm name (a str); 0, or -1 with Error raised naming the known ones. */
static int parse_algo(PyObject *name, ch_algo_id *out)
{
    const char *s = c_string(name, "algorithm");
    if (s == NULL)
        return -1;
    if (ch_algo_from_name(s, out) == CH_OK)
        return 0;
    char known[2048], msg[2400];
    names_list(known, sizeof(known), algo_name_u);
    snprintf(msg, sizeof(msg), "unknown algorithm '%.200s' (algorithms: %s)", s, known);
    raise_status(Error, CH_EUNKNOWN, msg);
    return -1;
}

static int parse_hash(PyObject *name, ch_hash_id *out)
{
    const char *s = c_string(name, "hash");
    if (s == NULL)
        return -1;
    if (ch_hash_from_name(s, out) == CH_OK)
        return 0;
    char known[2048], msg[2400];
    names_list(known, sizeof(known), hash_name_u);
    snprintf(msg, sizeof(msg), "unknown hash '%.200s' (hashes: %s)", s, known);
    raise_status(Error, CH_EUNKNOWN, msg);
    return -1;
}

static PyObject *registry_tuple(const char *(*name_of)(unsigned), unsigned count)
{
    PyObject *t = PyTuple_New(count);
    if (t == NULL)
        return NULL;
    for (unsigned i = 0; i < count; i++) {
        PyObject *s = PyUnicode_FromString(name_of(i));
        if (s == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *mod_algorithms(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return registry_tuple(algo_name_u, CH_ALGO_COUNT_);
}

static PyObject *mod_hashes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return registry_tuple(hash_name_u, CH_HASH_COUNT_);
}

static PyObject *mod_algorithm_info(PyObject *self, PyObject *name)
{
    (void)self;
    ch_algo_id a;
    if (parse_algo(name, &a) < 0)
        return NULL;
    unsigned fl = ch_algo_flags(a);
    ch_hash_id h;
    double wmax = ch_algo_max_weight(a);
    PyObject *fixed = ch_algo_hash(a, &h) == CH_OK ? PyUnicode_FromString(ch_hash_name(h))
                                                    : Py_NewRef(Py_None);
    PyObject *max_weight = wmax > 0 ? PyFloat_FromDouble(wmax) : Py_NewRef(Py_None);
    if (fixed == NULL || max_weight == NULL) {
        Py_XDECREF(fixed);
        Py_XDECREF(max_weight);
        return NULL;
    }
    const char *limits = ch_algo_limits(a);
    return Py_BuildValue("{s:s,s:O,s:N,s:N,s:O,s:O,s:O,s:O,s:O,s:z}", "name", ch_algo_name(a),
                         "weighted", (fl & CH_ALGO_F_WEIGHTED) ? Py_True : Py_False,
                         "max_weight", max_weight, "fixed_hash", fixed, "address_ids",
                         (fl & CH_ALGO_F_ADDR_IDS) ? Py_True : Py_False, "keyed",
                         (fl & CH_ALGO_F_KEYED) ? Py_True : Py_False, "walk",
                         (a == CH_ALGO_JUMP || a == CH_ALGO_GUAVA_31 || (fl & CH_ALGO_F_KEYED))
                             ? Py_False
                             : Py_True,
                         "whole_weights", (fl & CH_ALGO_F_WHOLE_WEIGHTS) ? Py_True : Py_False,
                         "consistent", (fl & CH_ALGO_F_REMAPS) ? Py_False : Py_True, "limits",
                         limits);
}

/* ---- keys ----------------------------------------------------------------------------------- */

/* A key's bytes: a str as UTF-8 (cached in the str by CPython), bytes, or bytearray. The bytes
 * live as long as the object (a bytearray's only until it is resized: callers hold the GIL).
 * 0, or -1 with TypeError/UnicodeEncodeError raised. */
static int key_bytes(PyObject *k, const char **p, Py_ssize_t *len)
{
    if (PyUnicode_Check(k)) {
        *p = PyUnicode_AsUTF8AndSize(k, len);
        return *p != NULL ? 0 : -1;
    }
    if (PyBytes_Check(k)) {
        *p = PyBytes_AS_STRING(k);
        *len = PyBytes_GET_SIZE(k);
        return 0;
    }
    if (PyByteArray_Check(k)) {
        *p = PyByteArray_AS_STRING(k);
        *len = PyByteArray_GET_SIZE(k);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "a key must be str, bytes or bytearray, not %.100s",
                 Py_TYPE(k)->tp_name);
    return -1;
}

/* ---- Table: building ------------------------------------------------------------------------ */

static PyTypeObject TableType;

/* Options of a build, from Python arguments (None: the default). 0, or -1 with an error. */
static int options_from_args(ch_options *opt, PyObject *algorithm, PyObject *hash,
                             PyObject *vnodes, PyObject *table_size, PyObject *hash_tag)
{
    if (algorithm != NULL && algorithm != Py_None && parse_algo(algorithm, &opt->algo) < 0)
        return -1;
    if (hash != NULL && hash != Py_None && parse_hash(hash, &opt->hash) < 0)
        return -1;
    if (vnodes != NULL && vnodes != Py_None) {
        unsigned long long v = PyLong_AsUnsignedLongLong(vnodes);
        if (PyErr_Occurred())
            return -1;
        if (v > CH_MAX_POINTS) {
            PyErr_Format(PyExc_ValueError, "vnodes %llu is above the limit %u", v,
                         (unsigned)CH_MAX_POINTS);
            return -1;
        }
        opt->vnodes = (uint32_t)v; /* 0: the algorithm's own default */
    }
    if (table_size != NULL && table_size != Py_None) {
        unsigned long long v = PyLong_AsUnsignedLongLong(table_size);
        if (PyErr_Occurred())
            return -1;
        if (v == 0 || v > CH_MAX_POINTS) {
            PyErr_Format(PyExc_ValueError, "table_size %llu is not in 1..%u", v,
                         (unsigned)CH_MAX_POINTS);
            return -1;
        }
        opt->table_size = (uint32_t)v;
    }
    if (hash_tag != NULL && hash_tag != Py_None) {
        const char *s = c_string(hash_tag, "hash_tag");
        if (s == NULL)
            return -1;
        if (strlen(s) != 2) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError,
                                "hash_tag must be a str of two ASCII characters, e.g. '{}'");
            return -1;
        }
        opt->hash_tag[0] = s[0];
        opt->hash_tag[1] = s[1];
    }
    return 0;
}

/* Builds self->t from nodes[0..n) and fills the tuples (addrs/names may be NULL: then the ids
 * and None). 0, or -1 with an error; self is unchanged on failure. */
static int table_set(TableObject *self, const ch_node *nodes, size_t n, const ch_options *opt,
                     const char *const *addrs, const char *const *names)
{
    ch_table *t = NULL;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_table_build_err(nodes, n, opt, &t, &err);
    if (rc != CH_OK) {
        char msg[512];
        snprintf(msg, sizeof(msg), "cannot build a %s table of %zu nodes: %s",
                 ch_algo_name(opt->algo) ? ch_algo_name(opt->algo) : "?", n, err.message);
        raise_status(Error, rc, msg);
        return -1;
    }
    PyObject *ids = PyTuple_New((Py_ssize_t)n);
    PyObject *ad = PyTuple_New((Py_ssize_t)n);
    PyObject *nm = PyTuple_New((Py_ssize_t)n);
    if (ids == NULL || ad == NULL || nm == NULL)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        PyObject *id = PyUnicode_FromString(ch_table_node_id(t, i));
        if (id == NULL)
            goto fail;
        PyTuple_SET_ITEM(ids, (Py_ssize_t)i, id);
        PyObject *a = addrs ? PyUnicode_FromString(addrs[i]) : Py_NewRef(id);
        if (a == NULL)
            goto fail;
        PyTuple_SET_ITEM(ad, (Py_ssize_t)i, a);
        PyObject *s = names && names[i] ? PyUnicode_FromString(names[i]) : Py_NewRef(Py_None);
        if (s == NULL)
            goto fail;
        PyTuple_SET_ITEM(nm, (Py_ssize_t)i, s);
    }
    self->t = t;
    self->n = n;
    self->ids = ids;
    self->addrs = ad;
    self->names = nm;
    self->keyed = (ch_algo_flags(opt->algo) & CH_ALGO_F_KEYED) != 0;
    return 0;
fail:
    Py_XDECREF(ids);
    Py_XDECREF(ad);
    Py_XDECREF(nm);
    ch_table_free(t);
    return -1;
}

/* One node argument: "id" or (id, weight). Borrows the id's UTF-8 from item (kept alive by the
 * caller's sequence). 0, or -1 with an error. */
static int node_from_item(PyObject *item, PyObject *weight_obj, ch_node *out)
{
    PyObject *id = item;
    if (weight_obj == NULL && PyTuple_Check(item)) {
        if (PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "a node is an id (str) or an (id, weight) pair");
            return -1;
        }
        id = PyTuple_GET_ITEM(item, 0);
        weight_obj = PyTuple_GET_ITEM(item, 1);
    }
    const char *s = c_string(id, "a node id");
    if (s == NULL)
        return -1;
    double w = 1.0;
    if (weight_obj != NULL) {
        w = PyFloat_AsDouble(weight_obj);
        if (w == -1.0 && PyErr_Occurred())
            return -1;
    }
    *out = (ch_node){.id = s, .weight = w};
    return 0;
}

static int Table_init(TableObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "algorithm", "hash", "vnodes", "table_size", "hash_tag",
                             NULL};
    PyObject *nodes, *algorithm = NULL, *hash = NULL, *vnodes = NULL, *table_size = NULL,
                     *hash_tag = NULL;
    if (self->t != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Table is immutable: it cannot be initialised twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OOOO", kwlist, &nodes, &algorithm, &hash,
                                     &vnodes, &table_size, &hash_tag))
        return -1;
    ch_options opt;
    ch_options_init(&opt);
    opt.vnodes = 0; /* the algorithm's own default, as `chash lookup` without --vnodes */
    if (options_from_args(&opt, algorithm, hash, vnodes, table_size, hash_tag) < 0)
        return -1;
    if (PyUnicode_Check(nodes) || PyBytes_Check(nodes)) {
        PyErr_SetString(PyExc_TypeError,
                        "nodes must be a sequence of ids or (id, weight) pairs, or a mapping of "
                        "id to weight, not a single string");
        return -1;
    }
    int mapping = PyDict_Check(nodes);
    PyObject *seq = mapping ? PyDict_Items(nodes) : PySequence_Fast(nodes, "nodes must be a "
                                                                           "sequence or a mapping");
    if (seq == NULL)
        return -1;
    PyObject *fast = mapping ? PySequence_Fast(seq, "nodes") : Py_NewRef(seq);
    Py_DECREF(seq);
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    ch_node *arr = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(*arr));
    int rc = -1;
    if (arr == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (node_from_item(PySequence_Fast_GET_ITEM(fast, i), NULL, &arr[i]) < 0)
            goto out;
    rc = table_set(self, arr, (size_t)n, &opt, NULL, NULL);
    if (rc == 0) {
        self->version = Py_NewRef(Py_None);
        self->pool = Py_NewRef(Py_None);
    }
out:
    PyMem_Free(arr);
    Py_DECREF(fast);
    return rc;
}

/* A Table from a loaded pool: its members in the order and with the ids the peers use under
 * the algorithm in force (ch_config_members), its hash and hash_tag (ch_config_options) unless
 * overridden. Returns a new Table, or NULL with an error. */
static PyObject *table_from_pool(PyTypeObject *type, const ch_conf_pool *p, const char *source,
                                 PyObject *algorithm, PyObject *hash, PyObject *vnodes,
                                 PyObject *table_size)
{
    if (p->nservers == 0) {
        char msg[768];
        snprintf(msg, sizeof(msg), "%s: pool '%s' has no servers%s%s", source, p->name,
                 ch_conf_membership_dns(p) ? ": its servers are the DNS records of "
                 : p->membership           ? ": its servers are in etcd, at "
                                           : "",
                 p->membership ? p->membership : "");
        return raise_status(Error, CH_EEMPTY, msg);
    }
    ch_options opt;
    ch_config_options(p, &opt); /* a loaded pool's names are valid */
    if (options_from_args(&opt, algorithm, hash, vnodes, table_size, NULL) < 0)
        return NULL;
    ch_member *m = PyMem_Calloc(p->nservers, sizeof(*m));
    ch_node *nodes = PyMem_Calloc(p->nservers, sizeof(*nodes));
    const char **addrs = PyMem_Calloc(p->nservers, sizeof(*addrs));
    const char **names = PyMem_Calloc(p->nservers, sizeof(*names));
    TableObject *self = NULL;
    if (m == NULL || nodes == NULL || addrs == NULL || names == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    ch_config_members(p, opt.algo, m);
    for (size_t i = 0; i < p->nservers; i++) {
        nodes[i] = (ch_node){.id = m[i].id, .weight = m[i].weight};
        addrs[i] = m[i].addr;
        names[i] = m[i].name;
    }
    self = (TableObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        goto out;
    if (table_set(self, nodes, p->nservers, &opt, addrs, names) < 0) {
        Py_CLEAR(self);
        goto out;
    }
    self->version = p->version ? PyUnicode_FromString(p->version) : Py_NewRef(Py_None);
    self->pool = PyUnicode_FromString(p->name);
    if (self->version == NULL || self->pool == NULL)
        Py_CLEAR(self);
out:
    PyMem_Free(m);
    PyMem_Free(nodes);
    PyMem_Free(addrs);
    PyMem_Free(names);
    return (PyObject *)self;
}

/* The pool named `pool` (None: the only one), or NULL with Error naming the pools. */
static const ch_conf_pool *pick_pool(const ch_config *cfg, PyObject *pool, const char *source)
{
    const char *name = NULL;
    if (pool != NULL && pool != Py_None && (name = c_string(pool, "pool")) == NULL)
        return NULL;
    const ch_conf_pool *p = ch_config_pool(cfg, name);
    if (p != NULL)
        return p;
    char names[512] = "", msg[1024];
    for (size_t i = 0; i < cfg->npools; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", cfg->pools[i].name);
    }
    if (name)
        snprintf(msg, sizeof(msg), "%s has no pool '%s' (pools: %s)", source, name, names);
    else
        snprintf(msg, sizeof(msg), "%s has %zu pools; choose one with pool= (%s)", source,
                 cfg->npools, names);
    raise_status(Error, CH_EUNKNOWN, msg);
    return NULL;
}

static PyObject *Table_from_config(PyObject *cls, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "pool", "algorithm", "hash", "vnodes", "table_size", NULL};
    PyObject *path, *pool = NULL, *algorithm = NULL, *hash = NULL, *vnodes = NULL,
                    *table_size = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|O$OOOO", kwlist, PyUnicode_FSConverter,
                                     &path, &pool, &algorithm, &hash, &vnodes, &table_size))
        return NULL;
    const char *file = PyBytes_AS_STRING(path);
    ch_config *cfg = NULL;
    ch_config_error err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ch_config_load(file, &cfg, &err);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL;
    if (rc != CH_OK) {
        raise_config(rc, &err);
    } else {
        const ch_conf_pool *p = pick_pool(cfg, pool, file);
        if (p != NULL)
            res = table_from_pool((PyTypeObject *)cls, p, file, algorithm, hash, vnodes,
                                  table_size);
        ch_config_free(cfg);
    }
    Py_DECREF(path);
    return res;
}

static PyObject *Table_from_membership(PyObject *cls, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"document", "name", "algorithm", "hash", "vnodes", "table_size",
                             NULL};
    PyObject *doc, *name_obj = NULL, *algorithm = NULL, *hash = NULL, *vnodes = NULL,
                   *table_size = NULL;
    const char *name = "membership document";
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OOOO", kwlist, &doc, &name_obj,
                                     &algorithm, &hash, &vnodes, &table_size))
        return NULL;
    if (name_obj != NULL && (name = c_string(name_obj, "name")) == NULL)
        return NULL;
    const char *text;
    Py_ssize_t len;
    if (PyUnicode_Check(doc)) {
        if ((text = PyUnicode_AsUTF8AndSize(doc, &len)) == NULL)
            return NULL;
    } else if (PyBytes_Check(doc)) {
        text = PyBytes_AS_STRING(doc);
        len = PyBytes_GET_SIZE(doc);
    } else {
        PyErr_Format(PyExc_TypeError, "document must be str or bytes, not %.100s",
                     Py_TYPE(doc)->tp_name);
        return NULL;
    }
    ch_config *cfg = NULL;
    ch_config_error err;
    int64_t epoch = 0;
    int rc = ch_config_membership_parse("membership", name, text, (size_t)len, &cfg, &epoch, &err);
    if (rc != CH_OK)
        return raise_config(rc, &err);
    PyObject *t = table_from_pool((PyTypeObject *)cls, &cfg->pools[0], name, algorithm, hash,
                                  vnodes, table_size);
    ch_config_free(cfg);
    if (t == NULL)
        return NULL;
    PyObject *res = Py_BuildValue("(NL)", t, (long long)epoch);
    return res;
}

static void Table_dealloc(TableObject *self)
{
    ch_table_free(self->t);
    Py_XDECREF(self->ids);
    Py_XDECREF(self->addrs);
    Py_XDECREF(self->names);
    Py_XDECREF(self->version);
    Py_XDECREF(self->pool);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Every method below needs a built table (a subclass may skip __init__). */
static int need_table(const TableObject *self)
{
    if (self->t != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "Table was not initialised (Table.__init__ not called)");
    return -1;
}

/* ---- Table: lookups ------------------------------------------------------------------------- */

static PyObject *Table_lookup(TableObject *self, PyObject *key)
{
    const char *p;
    Py_ssize_t len;
    if (need_table(self) < 0 || key_bytes(key, &p, &len) < 0)
        return NULL;
    size_t i = ch_lookup(self->t, p, (size_t)len);
    return Py_NewRef(PyTuple_GET_ITEM(self->ids, (Py_ssize_t)i));
}

static PyObject *Table_index(TableObject *self, PyObject *key)
{
    const char *p;
    Py_ssize_t len;
    if (need_table(self) < 0 || key_bytes(key, &p, &len) < 0)
        return NULL;
    return PyLong_FromSize_t(ch_lookup(self->t, p, (size_t)len));
}

static PyObject *Table_address(TableObject *self, PyObject *key)
{
    const char *p;
    Py_ssize_t len;
    if (need_table(self) < 0 || key_bytes(key, &p, &len) < 0)
        return NULL;
    size_t i = ch_lookup(self->t, p, (size_t)len);
    return Py_NewRef(PyTuple_GET_ITEM(self->addrs, (Py_ssize_t)i));
}

static PyObject *Table_key_hash(TableObject *self, PyObject *key)
{
    const char *p;
    Py_ssize_t len;
    if (need_table(self) < 0 || key_bytes(key, &p, &len) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(ch_key_hash(self->t, p, (size_t)len));
}

/* The key's walk of at most r distinct nodes, as indexes into out (room for min(r, N)); the
 * count, or -1 with an error. */
static Py_ssize_t walk(TableObject *self, PyObject *key, Py_ssize_t r, size_t *out)
{
    const char *p;
    Py_ssize_t len;
    if (key_bytes(key, &p, &len) < 0)
        return -1;
    if (r == 0)
        return 0;
    if (r == 1 || self->n == 1) { /* the owner, by the key itself (a keyed scheme has no hash) */
        out[0] = ch_lookup(self->t, p, (size_t)len);
        return 1;
    }
    size_t count = 0;
    int rc = self->keyed ? CH_EUNSUPPORTED
                         : ch_replicas(self->t, p, (size_t)len, (size_t)r, out, &count);
    if (rc != CH_OK) {
        ch_table_info info = {.size = sizeof(info)};
        ch_table_info_get(self->t, &info);
        char what[256];
        snprintf(what, sizeof(what),
                 "%s has no failover order: replicas() needs r <= 1 with it (r = %zd)",
                 ch_algo_name(info.algo), r);
        raise_status(Error, rc, what);
        return -1;
    }
    return (Py_ssize_t)count;
}

/* replicas() and replica_indexes(): the walk as a list of ids (as_index 0) or of indexes. */
static PyObject *walk_list(TableObject *self, PyObject *const *args, Py_ssize_t nargs,
                           int as_index)
{
    if (need_table(self) < 0)
        return NULL;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "replicas(key, r) takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t r = PyLong_AsSsize_t(args[1]);
    if (r == -1 && PyErr_Occurred())
        return NULL;
    if (r < 0) {
        PyErr_Format(PyExc_ValueError, "r must be >= 0, not %zd", r);
        return NULL;
    }
    if ((size_t)r > self->n)
        r = (Py_ssize_t)self->n;
    size_t stack[WALK_STACK];
    size_t *out = r <= WALK_STACK ? stack : PyMem_Malloc((size_t)r * sizeof(*out));
    if (out == NULL)
        return PyErr_NoMemory();
    PyObject *res = NULL;
    Py_ssize_t count = walk(self, args[0], r, out);
    if (count >= 0)
        res = PyList_New(count);
    for (Py_ssize_t i = 0; res != NULL && i < count; i++) {
        PyObject *v = as_index ? PyLong_FromSize_t(out[i])
                               : Py_NewRef(PyTuple_GET_ITEM(self->ids, (Py_ssize_t)out[i]));
        if (v == NULL)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, v);
    }
    if (out != stack)
        PyMem_Free(out);
    return res;
}

static PyObject *Table_replicas(TableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return walk_list(self, args, nargs, 0);
}

static PyObject *Table_replica_indexes(TableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return walk_list(self, args, nargs, 1);
}

/* lookup_many / index_many: the owners of keys (any iterable), as a list of ids (as_index 0) or
 * of indexes. Keys go in chunks of BATCH_CHUNK, each pass over a chunk staying in the cache: the
 * chunk's keys are referenced (so no other thread can free one while the GIL is released for a
 * full chunk) and their bytes read into private arrays, then hashed, then the results stored. */
static PyObject *many(TableObject *self, PyObject *keys, int as_index)
{
    if (need_table(self) < 0)
        return NULL;
    if (PyUnicode_Check(keys) || PyBytes_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "keys must be an iterable of keys, not a single key");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of keys");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *res = PyList_New(n);
    PyObject *hold[BATCH_CHUNK];
    const char *ptr[BATCH_CHUNK];
    size_t len[BATCH_CHUNK]; /* a key's length, then its owner's index */
    const ch_table *t = self->t;
    for (Py_ssize_t base = 0; res != NULL && base < n; base += BATCH_CHUNK) {
        if (PySequence_Fast_GET_SIZE(seq) != n) { /* another thread changed the list */
            PyErr_SetString(PyExc_RuntimeError, "lookup_many: the keys changed size meanwhile");
            Py_CLEAR(res);
            break;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        Py_ssize_t m = n - base < BATCH_CHUNK ? n - base : BATCH_CHUNK, held = 0;
        for (; held < m; held++) {
            PyObject *k = hold[held] = Py_NewRef(items[base + held]);
            Py_ssize_t l;
            if (PyByteArray_Check(k)) { /* mutable: not safe to read without the GIL */
                PyErr_SetString(PyExc_TypeError,
                                "lookup_many takes str or bytes keys, not bytearray");
                Py_DECREF(k);
                break;
            }
            if (key_bytes(k, &ptr[held], &l) < 0) {
                Py_DECREF(k);
                break;
            }
            len[held] = (size_t)l;
        }
        if (held == m) {
            if (m == BATCH_CHUNK) {
                Py_BEGIN_ALLOW_THREADS
                for (Py_ssize_t i = 0; i < m; i++)
                    len[i] = ch_lookup(t, ptr[i], len[i]);
                Py_END_ALLOW_THREADS
            } else {
                for (Py_ssize_t i = 0; i < m; i++)
                    len[i] = ch_lookup(t, ptr[i], len[i]);
            }
        }
        for (Py_ssize_t i = 0; i < held; i++) {
            Py_DECREF(hold[i]);
            if (held < m || res == NULL)
                continue;
            PyObject *v = as_index ? PyLong_FromSize_t(len[i])
                                   : Py_NewRef(PyTuple_GET_ITEM(self->ids, (Py_ssize_t)len[i]));
            if (v == NULL)
                Py_CLEAR(res);
            else
                PyList_SET_ITEM(res, base + i, v);
        }
        if (held < m)
            Py_CLEAR(res);
    }
    Py_DECREF(seq);
    return res;
}

static PyObject *Table_lookup_many(TableObject *self, PyObject *keys)
{
    return many(self, keys, 0);
}

static PyObject *Table_index_many(TableObject *self, PyObject *keys)
{
    return many(self, keys, 1);
}

static PyObject *Table_shares(TableObject *self, PyObject *unused)
{
    (void)unused;
    if (need_table(self) < 0)
        return NULL;
    double *s = PyMem_Calloc(self->n, sizeof(*s));
    if (s == NULL)
        return PyErr_NoMemory();
    int rc = ch_table_shares(self->t, s);
    PyObject *res = NULL;
    if (rc != CH_OK)
        raise_chash(rc, "cannot compute the shares");
    else if ((res = PyList_New((Py_ssize_t)self->n)) != NULL)
        for (size_t i = 0; i < self->n; i++) {
            PyObject *v = PyFloat_FromDouble(s[i]);
            if (v == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, v);
        }
    PyMem_Free(s);
    return res;
}

/* ---- Table: attributes ---------------------------------------------------------------------- */

static PyObject *Table_get_info(TableObject *self, void *field)
{
    if (need_table(self) < 0)
        return NULL;
    ch_table_info info = {.size = sizeof(info)};
    ch_table_info_get(self->t, &info);
    const char *f = field;
    if (strcmp(f, "algorithm") == 0)
        return PyUnicode_FromString(ch_algo_name(info.algo));
    if (strcmp(f, "hash") == 0)
        return PyUnicode_FromString(ch_hash_name(info.hash));
    if (strcmp(f, "vnodes") == 0)
        return PyLong_FromUnsignedLong(info.vnodes);
    if (strcmp(f, "table_size") == 0)
        return PyLong_FromUnsignedLong(info.table_size);
    if (strcmp(f, "points") == 0)
        return PyLong_FromSize_t(info.points);
    return PyLong_FromSize_t(info.bytes); /* "bytes" */
}

static PyObject *Table_get_weights(TableObject *self, void *unused)
{
    (void)unused;
    if (need_table(self) < 0)
        return NULL;
    PyObject *res = PyTuple_New((Py_ssize_t)self->n);
    for (size_t i = 0; res != NULL && i < self->n; i++) {
        PyObject *v = PyFloat_FromDouble(ch_table_node_weight(self->t, i));
        if (v == NULL)
            Py_CLEAR(res);
        else
            PyTuple_SET_ITEM(res, (Py_ssize_t)i, v);
    }
    return res;
}

static Py_ssize_t Table_len(TableObject *self)
{
    return (Py_ssize_t)self->n;
}

static PyObject *Table_repr(TableObject *self)
{
    if (self->t == NULL)
        return PyUnicode_FromString("<chash.Table (uninitialised)>");
    ch_table_info info = {.size = sizeof(info)};
    ch_table_info_get(self->t, &info);
    return PyUnicode_FromFormat("<chash.Table %s hash=%s nodes=%zu points=%zu>",
                                ch_algo_name(info.algo), ch_hash_name(info.hash), info.nodes,
                                info.points);
}

#define INFO_GETSET(name, doc) {name, (getter)Table_get_info, NULL, PyDoc_STR(doc), name}

static PyGetSetDef Table_getset[] = {
    INFO_GETSET("algorithm", "The placement scheme's registry name (e.g. 'ring', 'ketama')."),
    INFO_GETSET("hash", "The key hash's registry name."),
    INFO_GETSET("vnodes", "Ring points per unit weight, as built (ring schemes)."),
    INFO_GETSET("table_size", "The maglev table size, as built."),
    INFO_GETSET("points", "Ring points or maglev slots; N for the others."),
    INFO_GETSET("bytes", "Heap bytes owned by the C table."),
    {"weights", (getter)Table_get_weights, NULL, PyDoc_STR("Node weights, in node order."), NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Table_members[] = {
    {"nodes", T_OBJECT, offsetof(TableObject, ids), READONLY,
     PyDoc_STR("Node ids (tuple of str), in node order: index i is node i.")},
    {"addresses", T_OBJECT, offsetof(TableObject, addrs), READONLY,
     PyDoc_STR("Node addresses ('host:port' from a config; the ids otherwise).")},
    {"names", T_OBJECT, offsetof(TableObject, names), READONLY,
     PyDoc_STR("The servers' names in a config (str or None each).")},
    {"version", T_OBJECT, offsetof(TableObject, version), READONLY,
     PyDoc_STR("A config pool's 'version' key, or None.")},
    {"pool", T_OBJECT, offsetof(TableObject, pool), READONLY,
     PyDoc_STR("The config pool's name, or None.")},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef Table_methods[] = {
    {"lookup", (PyCFunction)Table_lookup, METH_O,
     PyDoc_STR("lookup(key) -> str\n\nThe id of the key's owner. A key is str (hashed as UTF-8), "
               "bytes or bytearray.")},
    {"index", (PyCFunction)Table_index, METH_O,
     PyDoc_STR("index(key) -> int\n\nThe index of the key's owner in nodes.")},
    {"address", (PyCFunction)Table_address, METH_O,
     PyDoc_STR("address(key) -> str\n\nThe owner's address ('host:port' for a config pool).")},
    {"key_hash", (PyCFunction)Table_key_hash, METH_O,
     PyDoc_STR("key_hash(key) -> int\n\nThe table's 64-bit hash of the key (ch_key_hash).")},
    {"replicas", (PyCFunction)(void (*)(void))Table_replicas, METH_FASTCALL,
     PyDoc_STR("replicas(key, r) -> list[str]\n\nThe first min(r, N) distinct nodes of the key's "
               "walk: the owner, then its failover order. Error for r > 1 with a scheme that has "
               "no walk (jump, guava@31, pymemcache@3).")},
    {"replica_indexes", (PyCFunction)(void (*)(void))Table_replica_indexes, METH_FASTCALL,
     PyDoc_STR("replica_indexes(key, r) -> list[int]\n\nAs replicas(), as node indexes.")},
    {"lookup_many", (PyCFunction)Table_lookup_many, METH_O,
     PyDoc_STR("lookup_many(keys) -> list[str]\n\nThe owners of many keys (str or bytes) in one "
               "call; every 512 keys release the GIL while they hash.")},
    {"index_many", (PyCFunction)Table_index_many, METH_O,
     PyDoc_STR("index_many(keys) -> list[int]\n\nAs lookup_many(), as node indexes.")},
    {"shares", (PyCFunction)Table_shares, METH_NOARGS,
     PyDoc_STR("shares() -> list[float]\n\nThe fraction of the key-hash space each node owns.")},
    {"from_config", (PyCFunction)(void (*)(void))Table_from_config,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("from_config(path, pool=None, *, algorithm=None, hash=None, vnodes=None, "
               "table_size=None) -> Table\n\nA table from a twemproxy (nutcracker) YAML pool, as "
               "chash-proxy builds it: the pool's distribution, hash and hash_tag, the servers in "
               "the order and with the names nutcracker hashes. ConfigError names "
               "file:line:column.")},
    {"from_membership", (PyCFunction)(void (*)(void))Table_from_membership,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     PyDoc_STR("from_membership(document, name='membership document', *, algorithm=None, "
               "hash=None, vnodes=None, table_size=None) -> (Table, epoch)\n\nA table from a "
               "chash membership document (docs/FLEET.md: YAML or JSON with 'servers', and "
               "optionally 'hash', 'distribution', 'hash_tag', 'version', 'epoch').")},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Table_as_sequence = {.sq_length = (lenfunc)Table_len};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chash.Table",
    .tp_basicsize = sizeof(TableObject),
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_repr = (reprfunc)Table_repr,
    .tp_as_sequence = &Table_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = PyDoc_STR(
        "Table(nodes, algorithm='ring', *, hash=None, vnodes=None, table_size=None, "
        "hash_tag=None)\n\n"
        "An immutable placement table over libchash. nodes: ids (str), (id, weight) pairs, or a "
        "dict of id to weight. algorithm: a registry name (chash.algorithms()); hash: a "
        "registry name (chash.hashes()), default fnv1a32_fmix, ignored by the client-library "
        "schemes that fix their own; vnodes None or 0: the algorithm's default. A Table is "
        "immutable: share it between threads freely; rebuild it for a membership change."),
    .tp_methods = Table_methods,
    .tp_members = Table_members,
    .tp_getset = Table_getset,
    .tp_init = (initproc)Table_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module --------------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"algorithms", mod_algorithms, METH_NOARGS,
     PyDoc_STR("algorithms() -> tuple[str, ...]\n\nEvery placement scheme's registry name.")},
    {"hashes", mod_hashes, METH_NOARGS,
     PyDoc_STR("hashes() -> tuple[str, ...]\n\nEvery hash function's registry name.")},
    {"algorithm_info", mod_algorithm_info, METH_O,
     PyDoc_STR("algorithm_info(name) -> dict\n\nWhat a scheme takes: weighted, max_weight, "
               "fixed_hash, address_ids, keyed, walk (whether replicas(r > 1) works).")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "chash._chash",
    .m_doc = PyDoc_STR("libchash's placement tables (the C extension under the chash package)."),
    .m_size = -1, .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__chash(void);

PyMODINIT_FUNC PyInit__chash(void)
{
    if (PyType_Ready(&TableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Error = PyErr_NewExceptionWithDoc(
        "chash.Error", "A libchash call failed; .code is its status (a negative CH_E* value).",
        PyExc_ValueError, NULL);
    ConfigError = Error ? PyErr_NewExceptionWithDoc("chash.ConfigError",
                                                    "A config file or membership document was "
                                                    "refused; .file, .line and .column say where.",
                                                    Error, NULL)
                        : NULL;
    if (ConfigError == NULL || PyModule_AddObjectRef(m, "Error", Error) < 0 ||
        PyModule_AddObjectRef(m, "ConfigError", ConfigError) < 0 ||
        PyModule_AddObjectRef(m, "Table", (PyObject *)&TableType) < 0 ||
        PyModule_AddStringConstant(m, "library_version", ch_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NODES", CH_MAX_NODES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
