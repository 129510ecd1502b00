/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash_jni.c — the JNI shim under the Java binding (bindings/java/src/chash/Native.java).
 *
 * Every function here is a thin crossing: it turns Java arrays and strings into the C API's
 * arguments (include/chash.h, include/chash_config.h) and errors into chash.ChashException
 * carrying libchash's own message. A table handle is the ch_table pointer as a jlong; the Java
 * side (Table.java) owns it, frees it once (close() or its Cleaner) and keeps the Table
 * reachable across each call (Reference.reachabilityFence), so a handle given here is live.
 *
 * Lookups hold the key bytes with Get/ReleasePrimitiveArrayCritical: no copy, and nothing in
 * between calls back into the JVM or blocks (ch_lookup and ch_replicas are pure and bounded).
 */
#include <jni.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chash.h"
#include "chash_config.h"
#include "chash_Native.h" /* javac -h: the prototypes of Native.java's native methods */

/* ---- errors --------------------------------------------------------------------------------- */

/* Throws chash.ChashException(status, message): the message goes as UTF-8 bytes (it may quote a
 * file name or a value that is not valid UTF-8; NewStringUTF takes only modified UTF-8). A
 * pending exception (e.g. from a failed FindClass) is left as it is. */
static void throw_chash(JNIEnv *env, int status, const char *message) {
    if ((*env)->ExceptionCheck(env))
        return;
    jclass cls = (*env)->FindClass(env, "chash/ChashException");
    if (cls == NULL)
        return;
    jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(I[B)V");
    jsize n = (jsize)strlen(message);
    jbyteArray msg = (*env)->NewByteArray(env, n);
    if (ctor == NULL || msg == NULL)
        return;
    (*env)->SetByteArrayRegion(env, msg, 0, n, (const jbyte *)message);
    jobject e = (*env)->NewObject(env, cls, ctor, (jint)status, msg);
    if (e != NULL)
        (*env)->Throw(env, (jthrowable)e);
}

/* "what: libchash's message" for a status. */
static void throw_status(JNIEnv *env, int status, const char *what) {
    char buf[768];
    snprintf(buf, sizeof buf, "%.600s: %s", what, ch_strerror(status));
    throw_chash(env, status, buf);
}

static void throw_config(JNIEnv *env, int status, const ch_config_error *err) {
    char buf[1024];
    throw_chash(env, status, ch_config_error_str(err, buf, sizeof buf));
}

/* A byte[] (text the Java side encoded as standard UTF-8, not the JVM's modified UTF-8) as a
 * malloc'ed NUL-terminated copy; null stays NULL. One holding a NUL byte is refused naming the
 * argument (what), as C would read it as a shorter string. NULL with an exception pending on
 * failure. */
static char *dup_bytes(JNIEnv *env, jbyteArray b, const char *what) {
    if (b == NULL)
        return NULL;
    jsize n = (*env)->GetArrayLength(env, b);
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        throw_status(env, CH_ENOMEM, "chash");
        return NULL;
    }
    (*env)->GetByteArrayRegion(env, b, 0, n, (jbyte *)s);
    s[n] = '\0';
    const char *nul = memchr(s, '\0', (size_t)n);
    if (nul != NULL) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "chash: %s holds a NUL character (UTF-8 byte %ld of %ld), which C would read as "
                 "the end of a shorter string",
                 what, (long)(nul - s), (long)n);
        free(s);
        throw_chash(env, CH_EINVAL, msg);
        return NULL;
    }
    return s;
}

/* Sets arr[i] (a byte[][]) to the bytes of the NUL-terminated s (NULL stays null): text goes
 * back as bytes and the Java side decodes it, as NewStringUTF would misread 4-byte UTF-8.
 * Returns 0, or -1 with an exception pending. */
static int set_bytes(JNIEnv *env, jobjectArray arr, jsize i, const char *s) {
    if (s == NULL)
        return 0;
    jsize n = (jsize)strlen(s);
    jbyteArray b = (*env)->NewByteArray(env, n);
    if (b == NULL)
        return -1;
    (*env)->SetByteArrayRegion(env, b, 0, n, (const jbyte *)s);
    (*env)->SetObjectArrayElement(env, arr, i, b);
    (*env)->DeleteLocalRef(env, b);
    return (*env)->ExceptionCheck(env) ? -1 : 0;
}

static jobjectArray new_byte_arrays(JNIEnv *env, jsize n) {
    jclass cls = (*env)->FindClass(env, "[B");
    return cls == NULL ? NULL : (*env)->NewObjectArray(env, n, cls, NULL);
}

/* ---- registries ----------------------------------------------------------------------------- */

JNIEXPORT jobjectArray JNICALL Java_chash_Native_algorithms(JNIEnv *env, jclass cls) {
    (void)cls;
    jobjectArray out = new_byte_arrays(env, CH_ALGO_COUNT_);
    for (int i = 0; out != NULL && i < CH_ALGO_COUNT_; i++)
        if (set_bytes(env, out, i, ch_algo_name((ch_algo_id)i)) != 0)
            return NULL;
    return out;
}

JNIEXPORT jobjectArray JNICALL Java_chash_Native_hashes(JNIEnv *env, jclass cls) {
    (void)cls;
    jobjectArray out = new_byte_arrays(env, CH_HASH_COUNT_);
    for (int i = 0; out != NULL && i < CH_HASH_COUNT_; i++)
        if (set_bytes(env, out, i, ch_hash_name((ch_hash_id)i)) != 0)
            return NULL;
    return out;
}

JNIEXPORT jint JNICALL Java_chash_Native_algoFlags(JNIEnv *env, jclass cls, jint algo) {
    (void)env, (void)cls;
    return (jint)ch_algo_flags((ch_algo_id)algo);
}

JNIEXPORT jbyteArray JNICALL Java_chash_Native_version(JNIEnv *env, jclass cls) {
    (void)cls;
    const char *v = ch_version();
    jsize n = (jsize)strlen(v);
    jbyteArray b = (*env)->NewByteArray(env, n);
    if (b != NULL)
        (*env)->SetByteArrayRegion(env, b, 0, n, (const jbyte *)v);
    return b;
}

/* ---- building ------------------------------------------------------------------------------- */

/* Parses algo and hash names (NULL: the default) into o. Returns 0, or -1 with an exception
 * naming the unknown value. */
static int parse_names(JNIEnv *env, const char *algo, const char *hash, ch_options *o) {
    char buf[400];
    if (algo != NULL && ch_algo_from_name(algo, &o->algo) != CH_OK) {
        snprintf(buf, sizeof buf, "unknown algorithm '%.200s' (Schemes.algorithms() lists them)",
                 algo);
        throw_chash(env, CH_EUNKNOWN, buf);
        return -1;
    }
    if (hash != NULL && ch_hash_from_name(hash, &o->hash) != CH_OK) {
        snprintf(buf, sizeof buf, "unknown hash '%.200s' (Schemes.hashes() lists them)", hash);
        throw_chash(env, CH_EUNKNOWN, buf);
        return -1;
    }
    return 0;
}

/* Builds a table from ids (byte[][] of UTF-8) and weights with the given options. Returns the
 * handle, or 0 with a ChashException. */
JNIEXPORT jlong JNICALL Java_chash_Native_build(JNIEnv *env, jclass cls, jobjectArray ids,
                                                jdoubleArray weights, jbyteArray algo,
                                                jbyteArray hash, jint vnodes, jint table_size,
                                                jbyteArray hash_tag) {
    (void)cls;
    jsize n = (*env)->GetArrayLength(env, ids);
    ch_node *nodes = calloc(n > 0 ? (size_t)n : 1, sizeof *nodes);
    char *a = NULL, *h = NULL, *tag = NULL;
    jlong handle = 0;
    jsize got = 0;
    if (nodes == NULL) {
        throw_status(env, CH_ENOMEM, "ch_table_build");
        return 0;
    }
    for (; got < n; got++) {
        jbyteArray id = (jbyteArray)(*env)->GetObjectArrayElement(env, ids, got);
        nodes[got].id = dup_bytes(env, id, "a node id");
        (*env)->DeleteLocalRef(env, id);
        if ((*env)->ExceptionCheck(env))
            goto out;
    }
    for (jsize i = 0; i < n; i++) {
        jdouble w;
        (*env)->GetDoubleArrayRegion(env, weights, i, 1, &w);
        nodes[i].weight = w;
    }
    if ((a = dup_bytes(env, algo, "the algorithm")) == NULL && algo != NULL)
        goto out;
    if ((h = dup_bytes(env, hash, "the hash")) == NULL && hash != NULL)
        goto out;
    if ((tag = dup_bytes(env, hash_tag, "the hash tag")) == NULL && hash_tag != NULL)
        goto out;
    ch_options o;
    ch_options_init(&o);
    if (parse_names(env, a, h, &o) != 0)
        goto out;
    o.vnodes = (uint32_t)vnodes;
    if (table_size > 0)
        o.table_size = (uint32_t)table_size;
    if (tag != NULL) {
        if (strlen(tag) != 2) {
            throw_chash(env, CH_EINVAL, "hash_tag: two characters, e.g. \"{}\"");
            goto out;
        }
        o.hash_tag[0] = tag[0];
        o.hash_tag[1] = tag[1];
    }
    ch_table *t = NULL;
    ch_error err = {.size = sizeof err};
    int rc = ch_table_build_err(nodes, (size_t)n, &o, &t, &err);
    if (rc != CH_OK) {
        throw_chash(env, rc, err.message);
        goto out;
    }
    handle = (jlong)(intptr_t)t;
out:
    for (jsize i = 0; i < got; i++)
        free((char *)nodes[i].id);
    free(nodes);
    free(a);
    free(h);
    free(tag);
    return handle;
}

/* Builds the table of a loaded pool, as chash-proxy and `chash lookup --config` place its keys:
 * the pool's options (distribution, hash, hash_tag) over its members in the peers' order
 * (ch_config_members). meta (Object[2]) receives the members' addresses and names as byte[][]
 * (a name null when the server has none). Returns the handle, or 0 with an exception. */
static jlong pool_table(JNIEnv *env, const ch_conf_pool *p, jobjectArray meta) {
    ch_options o;
    ch_config_options(p, &o);
    size_t room = p->nservers > 0 ? p->nservers : 1; /* calloc(0) may be NULL */
    ch_member *m = calloc(room, sizeof *m);
    ch_node *nodes = calloc(room, sizeof *nodes);
    jlong handle = 0;
    if (m == NULL || nodes == NULL) {
        throw_status(env, CH_ENOMEM, "chash");
        goto out;
    }
    ch_config_members(p, o.algo, m);
    for (size_t i = 0; i < p->nservers; i++)
        nodes[i] = (ch_node){m[i].id, m[i].weight};
    jobjectArray addrs = new_byte_arrays(env, (jsize)p->nservers);
    jobjectArray names = new_byte_arrays(env, (jsize)p->nservers);
    if (addrs == NULL || names == NULL)
        goto out;
    for (size_t i = 0; i < p->nservers; i++)
        if (set_bytes(env, addrs, (jsize)i, m[i].addr) != 0 ||
            set_bytes(env, names, (jsize)i, m[i].name) != 0)
            goto out;
    (*env)->SetObjectArrayElement(env, meta, 0, addrs);
    (*env)->SetObjectArrayElement(env, meta, 1, names);
    if ((*env)->ExceptionCheck(env))
        goto out;
    ch_table *t = NULL;
    ch_error err = {.size = sizeof err};
    int rc = ch_table_build_err(nodes, p->nservers, &o, &t, &err);
    if (rc != CH_OK) {
        char msg[520];
        snprintf(msg, sizeof msg, "pool %.200s: %s", p->name, err.message);
        throw_chash(env, rc, msg);
        goto out;
    }
    handle = (jlong)(intptr_t)t;
out:
    free(m);
    free(nodes);
    return handle;
}

/* A twemproxy/nutcracker YAML file's pool (pool NULL: the file's only pool). */
JNIEXPORT jlong JNICALL Java_chash_Native_fromConfig(JNIEnv *env, jclass cls, jbyteArray path,
                                                     jbyteArray pool, jobjectArray meta) {
    (void)cls;
    char *file = dup_bytes(env, path, "the path");
    char *name = (*env)->ExceptionCheck(env) ? NULL : dup_bytes(env, pool, "the pool");
    jlong handle = 0;
    ch_config *cfg = NULL;
    ch_config_error err;
    if ((*env)->ExceptionCheck(env))
        goto out;
    int rc = ch_config_load(file, &cfg, &err);
    if (rc != CH_OK) {
        throw_config(env, rc, &err);
        goto out;
    }
    const ch_conf_pool *p = ch_config_pool(cfg, name);
    if (p == NULL) {
        char buf[700];
        if (name != NULL)
            snprintf(buf, sizeof buf, "%.400s: no pool '%.200s'", file, name);
        else
            snprintf(buf, sizeof buf, "%.400s: %zu pools: name the one to use", file, cfg->npools);
        throw_chash(env, CH_EUNKNOWN, buf);
        goto out;
    }
    handle = pool_table(env, p, meta);
out:
    ch_config_free(cfg);
    free(file);
    free(name);
    return handle;
}

/* A membership document (docs/FLEET.md: YAML or JSON with "servers", optionally "hash",
 * "distribution", "hash_tag", "version", "epoch") named `name` in errors. meta[2] receives
 * the document's version (byte[], or null) and meta[3] its epoch (long[1]). */
JNIEXPORT jlong JNICALL Java_chash_Native_fromMembership(JNIEnv *env, jclass cls,
                                                         jbyteArray doc_name, jbyteArray doc,
                                                         jobjectArray meta) {
    (void)cls;
    char *name = dup_bytes(env, doc_name, "the document's name");
    jlong handle = 0;
    ch_config *cfg = NULL;
    ch_config_error err;
    if ((*env)->ExceptionCheck(env))
        goto out;
    jsize len = (*env)->GetArrayLength(env, doc);
    void *text = malloc(len > 0 ? (size_t)len : 1);
    if (text == NULL) {
        throw_status(env, CH_ENOMEM, "chash");
        goto out;
    }
    (*env)->GetByteArrayRegion(env, doc, 0, len, (jbyte *)text);
    int64_t epoch = 0;
    int rc = ch_config_membership_parse("membership", name, text, (size_t)len, &cfg, &epoch, &err);
    free(text);
    if (rc != CH_OK) {
        throw_config(env, rc, &err);
        goto out;
    }
    const ch_conf_pool *p = ch_config_pool(cfg, NULL);
    jobjectArray version = new_byte_arrays(env, 1);
    if (version == NULL || set_bytes(env, version, 0, p->version) != 0)
        goto out;
    jlongArray epoch_out = (*env)->NewLongArray(env, 1);
    if (epoch_out == NULL)
        goto out;
    jlong e = (jlong)epoch;
    (*env)->SetLongArrayRegion(env, epoch_out, 0, 1, &e);
    (*env)->SetObjectArrayElement(env, meta, 2, (*env)->GetObjectArrayElement(env, version, 0));
    (*env)->SetObjectArrayElement(env, meta, 3, epoch_out);
    handle = pool_table(env, p, meta);
out:
    ch_config_free(cfg);
    free(name);
    return handle;
}

JNIEXPORT void JNICALL Java_chash_Native_free(JNIEnv *env, jclass cls, jlong t) {
    (void)env, (void)cls;
    ch_table_free((ch_table *)(intptr_t)t);
}

/* ---- the table's description ---------------------------------------------------------------- */

JNIEXPORT jobjectArray JNICALL Java_chash_Native_nodeIds(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    const ch_table *t = (const ch_table *)(intptr_t)h;
    ch_table_info info = {.size = sizeof info};
    ch_table_info_get(t, &info);
    jobjectArray out = new_byte_arrays(env, (jsize)info.nodes);
    for (size_t i = 0; out != NULL && i < info.nodes; i++)
        if (set_bytes(env, out, (jsize)i, ch_table_node_id(t, i)) != 0)
            return NULL;
    return out;
}

/* {algo id, hash id, points, bytes, vnodes, table size} */
JNIEXPORT jlongArray JNICALL Java_chash_Native_info(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    ch_table_info info = {.size = sizeof info};
    ch_table_info_get((const ch_table *)(intptr_t)h, &info);
    jlong v[6] = {info.algo, info.hash, (jlong)info.points, (jlong)info.bytes, info.vnodes,
                  info.table_size};
    jlongArray out = (*env)->NewLongArray(env, 6);
    if (out != NULL)
        (*env)->SetLongArrayRegion(env, out, 0, 6, v);
    return out;
}

JNIEXPORT jdouble JNICALL Java_chash_Native_nodeWeight(JNIEnv *env, jclass cls, jlong h, jint i) {
    (void)env, (void)cls;
    return ch_table_node_weight((const ch_table *)(intptr_t)h, (size_t)i);
}

/* ---- lookups -------------------------------------------------------------------------------- */

/* The owner of key[0, len). The Java side checks 0 <= len <= key.length. */
JNIEXPORT jint JNICALL Java_chash_Native_lookup(JNIEnv *env, jclass cls, jlong h, jbyteArray key,
                                                jint len) {
    (void)cls;
    const ch_table *t = (const ch_table *)(intptr_t)h;
    void *k = (*env)->GetPrimitiveArrayCritical(env, key, NULL);
    if (k == NULL)
        return -1; /* OutOfMemoryError pending */
    size_t owner = ch_lookup(t, k, (size_t)len);
    (*env)->ReleasePrimitiveArrayCritical(env, key, k, JNI_ABORT);
    return (jint)owner;
}

/* The key hash the table places by (ch_key_hash), as a signed 64-bit Java long. */
JNIEXPORT jlong JNICALL Java_chash_Native_keyHash(JNIEnv *env, jclass cls, jlong h, jbyteArray key,
                                                  jint len) {
    (void)cls;
    void *k = (*env)->GetPrimitiveArrayCritical(env, key, NULL);
    if (k == NULL)
        return 0;
    uint64_t v = ch_key_hash((const ch_table *)(intptr_t)h, k, (size_t)len);
    (*env)->ReleasePrimitiveArrayCritical(env, key, k, JNI_ABORT);
    return (jlong)v;
}

/* The first min(r, N) nodes of the key's walk into out[0..]; returns their number, or -1 with a
 * ChashException (e.g. jump or pymemcache@3, which have no walk). The Java side passes
 * 0 <= r <= N and out.length >= r. */
JNIEXPORT jint JNICALL Java_chash_Native_replicas(JNIEnv *env, jclass cls, jlong h,
                                                  jbyteArray key, jint len, jint r,
                                                  jintArray out) {
    (void)cls;
    size_t stack[16];
    size_t *buf = (size_t)r <= 16 ? stack : malloc((size_t)r * sizeof *buf);
    if (buf == NULL) {
        throw_status(env, CH_ENOMEM, "ch_replicas");
        return -1;
    }
    size_t count = 0;
    int rc = CH_ENOMEM;
    void *k = (*env)->GetPrimitiveArrayCritical(env, key, NULL);
    if (k != NULL) {
        rc = ch_replicas((const ch_table *)(intptr_t)h, k, (size_t)len, (size_t)r, buf, &count);
        (*env)->ReleasePrimitiveArrayCritical(env, key, k, JNI_ABORT);
    }
    if (rc == CH_OK) {
        for (size_t i = 0; i < count; i++) {
            jint v = (jint)buf[i];
            (*env)->SetIntArrayRegion(env, out, (jsize)i, 1, &v);
        }
    } else if (k != NULL) {
        throw_status(env, rc, "ch_replicas");
    }
    if (buf != stack)
        free(buf);
    return rc == CH_OK ? (jint)count : -1;
}

/* Owners of n keys packed in data: key i is data[ends[i-1], ends[i]) (ends[-1] = 0), into
 * out[0..n-1]. The Java side checks that ends is non-decreasing and within data. */
JNIEXPORT void JNICALL Java_chash_Native_lookupMany(JNIEnv *env, jclass cls, jlong h,
                                                    jbyteArray data, jintArray ends, jint n,
                                                    jintArray out) {
    (void)cls;
    const ch_table *t = (const ch_table *)(intptr_t)h;
    jint *e = (*env)->GetPrimitiveArrayCritical(env, ends, NULL);
    jint *o = e ? (*env)->GetPrimitiveArrayCritical(env, out, NULL) : NULL;
    const char *d = o ? (*env)->GetPrimitiveArrayCritical(env, data, NULL) : NULL;
    if (d != NULL) {
        jint start = 0;
        for (jint i = 0; i < n; i++) {
            o[i] = (jint)ch_lookup(t, d + start, (size_t)(e[i] - start));
            start = e[i];
        }
        (*env)->ReleasePrimitiveArrayCritical(env, data, (void *)d, JNI_ABORT);
    }
    if (o != NULL)
        (*env)->ReleasePrimitiveArrayCritical(env, out, o, 0);
    if (e != NULL)
        (*env)->ReleasePrimitiveArrayCritical(env, ends, e, JNI_ABORT);
}
