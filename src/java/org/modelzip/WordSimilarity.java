package org.modelzip;

/** A word and its cosine similarity to a query. An immutable value. */
public final class WordSimilarity {
  private final String word;
  private final float similarity;

  /** Built by the native glue (the word UTF-8). */
  WordSimilarity(byte[] word, float similarity) {
    this.word = Native.string(word);
    this.similarity = similarity;
  }

  public String word() {
    return word;
  }

  /** Cosine similarity, in [-1, 1]. */
  public float similarity() {
    return similarity;
  }

  /** Equal word and similarity (compared as {@link Float#compare} does). */
  @Override
  public boolean equals(Object other) {
    return other instanceof WordSimilarity
        && word.equals(((WordSimilarity) other).word)
        && Float.compare(similarity, ((WordSimilarity) other).similarity) == 0;
  }

  @Override
  public int hashCode() {
    return 31 * word.hashCode() + Float.hashCode(similarity);
  }

  @Override
  public String toString() {
    return word + " " + similarity;
  }
}
