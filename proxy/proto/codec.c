/*
 * codec.c — which codec serves a pool.
 */
#include "codec.h"

const px_codec *px_codec_of(const ch_conf_pool *pc)
{
    return pc->redis ? &px_codec_redis : &px_codec_memcache;
}
