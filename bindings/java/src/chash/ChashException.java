// SPDX-License-Identifier: Apache-2.0
package chash;

import java.nio.charset.StandardCharsets;

/**
 * An error of libchash: its status code (a negative {@code CH_E*} value of chash.h, e.g. -4
 * for an unknown name, -5 for a duplicate node id) and its message, e.g.
 * {@code "ch_table_build: duplicate node id"} or, for a YAML file,
 * {@code "pools.yml:7:5: ..."} (file:line:column).
 */
public class ChashException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;

    public ChashException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** Thrown from the JNI shim: the message as libchash's UTF-8 bytes. */
    ChashException(int status, byte[] message) {
        this(status, new String(message, StandardCharsets.UTF_8));
    }

    /** libchash's status code (chash.h's CH_STATUS_LIST), always negative. */
    public int status() {
        return status;
    }
}
