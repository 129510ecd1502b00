// SPDX-License-Identifier: Apache-2.0
package chash;

import java.util.Objects;

/**
 * A node of a table: its id (what the placement hashes: a server name, or "host:port" for the
 * schemes that name servers by address) and its weight (finite, &gt; 0; 1 is one unit).
 * Immutable.
 */
public final class Node {
    private final String id;
    private final double weight;

    public Node(String id, double weight) {
        this.id = Objects.requireNonNull(id, "id");
        this.weight = weight;
    }

    public Node(String id) {
        this(id, 1.0);
    }

    public String id() {
        return id;
    }

    public double weight() {
        return weight;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Node && ((Node) o).id.equals(id)
            && Double.compare(((Node) o).weight, weight) == 0;
    }

    @Override
    public int hashCode() {
        return id.hashCode() * 31 + Double.hashCode(weight);
    }

    @Override
    public String toString() {
        return weight == 1.0 ? id : id + ":" + weight;
    }
}
