/* tlv_parser: prints the records of a TLV1 message.
 *
 * Message: the 4 bytes "TLV1", then records. A record is one type byte, one length byte
 * holding '0' + length ('5' means 5, 'A' means 17), then `length` value bytes.
 * Type 'N' prints the value as a name, type 'S' prints a checksum of the value, type '.'
 * ends the message.
 */
#include <stdio.h>
#include <string.h>

#define MAX_MESSAGE 64

struct message {
    unsigned char bytes[MAX_MESSAGE];
    size_t size;
};

static unsigned checksum(const struct message *m, size_t off, size_t len) {
    unsigned sum = 0;
    for (size_t i = 0; i < len; i++)
        sum = sum * 31 + m->bytes[off + i];
    return sum;
}

static void print_name(const struct message *m, size_t off, size_t len) {
    printf("name: ");
    for (size_t i = 0; i < len; i++)
        putchar(m->bytes[off + i]);
    putchar('\n');
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    struct message m;
    memset(&m, 0, sizeof m);
    m.size = fread(m.bytes, 1, MAX_MESSAGE, f);
    fclose(f);
    if (m.size < 4 || memcmp(m.bytes, "TLV1", 4) != 0) {
        printf("not a TLV1 message\n");
        return 1;
    }
    size_t pos = 4;
    while (pos + 2 <= m.size) {
        unsigned char type = m.bytes[pos];
        size_t len = (size_t)(m.bytes[pos + 1] - '0');
        size_t off = pos + 2;
        if (type == '.')
            break;
        if (m.bytes[pos + 1] < '0') {
            printf("bad length byte\n");
            return 1;
        }
        if (type == 'N')
            print_name(&m, off, len);
        else if (type == 'S')
            printf("checksum: %u\n", checksum(&m, off, len));
        else
            printf("unknown record type '%c'\n", type);
        pos = off + len;
    }
    printf("done\n");
    return 0;
}
