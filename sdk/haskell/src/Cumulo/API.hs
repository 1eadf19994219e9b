{-# LANGUAGE OverloadedStrings #-}
{-# LANGUAGE ScopedTypeVariables #-}
-- | One service instance: a connection to the core (docs/SDK_GUIDE.md).
-- An 'API' belongs to one thread; 'run' starts one per thread.
module Cumulo.API where

import Control.Concurrent (forkIO, getNumCapabilities, setNumCapabilities)
import Control.Concurrent.MVar
import Control.Exception hiding (Handler, handle)
import Control.Monad (forM, forM_, unless, when)
import qualified Data.ByteString as B
import qualified Data.ByteString.Builder as BB
import qualified Data.ByteString.Lazy as BL
import Data.IORef
import Data.Int (Int8)
import qualified Data.Map.Strict as M
import Data.Maybe (fromMaybe)
import qualified Data.Sequence as Seq
import qualified Data.Set as S
import Data.Text (Text)
import qualified Data.Text as T
import qualified Data.Text.Encoding as TE
import qualified Data.Text.Encoding.Error as TEE
import Data.Time.Clock.System (SystemTime (..), getSystemTime)
import Data.Typeable (typeOf)
import Data.Word (Word16, Word32, Word64)
import GHC.Clock (getMonotonicTimeNSec)
import GHC.Conc (getNumProcessors)
import qualified Network.Socket as N
import qualified Network.Socket.ByteString as NB
import System.Environment (lookupEnv)
import System.Exit (exitWith, ExitCode (..))
import System.IO (hPutStrLn, stderr)
import System.Timeout (timeout)
import Text.Read (readMaybe)

import Cumulo.Codec
import Cumulo.Info (infoEncode, infoParse)
import Cumulo.Status

-- | What a handler answers: (response_info, response).
type Handler = API -> Request -> IO (B.ByteString, B.ByteString)

-- | One instance. Not thread-safe: one per thread.
data API = API
  { apiSocket :: !N.Socket
  , apiWelcome :: !Welcome
  , apiThreadIndex :: !Word32
  , apiBuffer :: !(IORef B.ByteString)        -- bytes read, not yet a whole frame
  , apiOut :: !(IORef [B.ByteString])         -- frames to write, newest first
  , apiInHandlers :: !(IORef Bool)            -- while handlers run, writes are batched
  , apiRequests :: !(IORef (Seq.Seq Request))
  , apiResponses :: !(IORef (M.Map TransId Answer))
  , apiReplies :: !(IORef (M.Map Word32 Reply))
  , apiMcastSent :: !(IORef (M.Map TransId [TransId]))
  , apiTerminated :: !(IORef Bool)
  , apiClosed :: !(IORef Bool)
  , apiHandlers :: !(IORef (M.Map Text Handler))
  , apiForwarded :: !(IORef (S.Set TransId))
  , apiLastReqId :: !(IORef Word32)
  , apiLastTime :: !(IORef Word64)
  , apiTrace :: !(IORef B.ByteString)         -- the running handler's trace context, see 'traceOf'
  }

-- | How to connect. 'defaultConfig' reads nothing; 'connect' fills what is
-- missing from the environment (CUMULO_SOCKET, CUMULO_TOKEN).
data Config = Config
  { configAddress :: Maybe String  -- ^ a Unix socket path or @tcp://HOST:PORT@
  , configToken :: Maybe Text
  , configPrefix :: Text           -- ^ unmanaged instances only
  , configWindow :: Word32         -- ^ requests the core may deliver at once
  , configThreadIndex :: Word32
  , configConnectTimeout :: Int    -- ^ milliseconds
  }

defaultConfig :: Config
defaultConfig = Config Nothing Nothing "" 1 0 10000

-- | Options of a send; 'Nothing' means the service's default.
data SendOptions = SendOptions
  { optInfo :: B.ByteString
  , optTimeout :: Maybe Word32
  , optPriority :: Maybe Int8
  , optWaitForService :: Bool
  }

defaultSend :: SendOptions
defaultSend = SendOptions B.empty Nothing Nothing False

protocolVersion :: Word16
protocolVersion = 1

-- | Extra time given to the core to deliver its own TIMEOUT before a wait gives up locally.
localGraceMs :: Word64
localGraceMs = 5000

readSize :: Int
readSize = 65536

-- ---------------------------------------------------------------- connecting

-- | Connect as the instance @thread_index@ of a process the core started
-- (CUMULO_SOCKET, CUMULO_TOKEN), with a window of 1.
connect :: Word32 -> IO API
connect index = connectWith defaultConfig {configThreadIndex = index}

-- | Connect without a token (a tool, a test): the instance names its prefix.
connectUnmanaged :: String -> Text -> IO API
connectUnmanaged address pfx =
  connectWith defaultConfig {configAddress = Just address, configToken = Just "", configPrefix = pfx}

-- | Connect, send HELLO and wait for WELCOME; an ERROR from the core is
-- thrown as 'CumuloError'.
connectWith :: Config -> IO API
connectWith cfg = do
  address <- maybe (fromMaybe "" <$> lookupEnv "CUMULO_SOCKET") pure (configAddress cfg)
  token <- maybe (maybe "" T.pack <$> lookupEnv "CUMULO_TOKEN") pure (configToken cfg)
  when (T.null token && T.null (configPrefix cfg)) $
    throwIO (CumuloError statusInvalidArgument "an unmanaged instance (no CUMULO_TOKEN) must name its prefix")
  sock <- openSocket address
  let hello = Hello protocolVersion (max 1 (configWindow cfg)) (configThreadIndex cfg) token
                (if T.null token then configPrefix cfg else "")
  (welcome, rest) <- handshake sock hello (configConnectTimeout cfg) `onException` N.close sock
  when (welcomeVersion welcome /= protocolVersion) $ do
    N.close sock
    throwIO (CumuloError statusUnsupportedVersion
      (T.pack ("the core speaks protocol version " ++ show (welcomeVersion welcome))))
  api <- API sock welcome (configThreadIndex cfg)
    <$> newIORef B.empty <*> newIORef [] <*> newIORef False <*> newIORef Seq.empty
    <*> newIORef M.empty <*> newIORef M.empty <*> newIORef M.empty <*> newIORef False
    <*> newIORef False <*> newIORef M.empty <*> newIORef S.empty <*> newIORef 0 <*> newIORef 0
    <*> newIORef B.empty
  -- frames that came in the same read as WELCOME
  unless (B.null rest) $ dispatchAll api rest
  pure api

openSocket :: String -> IO N.Socket
openSocket address
  | Just hostPort <- T.stripPrefix "tcp://" (T.pack address) = do
      let (host, port) = T.breakOnEnd ":" hostPort
      when (T.null host || T.null port) $
        throwIO (CumuloError statusInvalidArgument (T.pack ("bad address " ++ address ++ ": expected tcp://HOST:PORT")))
      let hints = N.defaultHints {N.addrSocketType = N.Stream}
      addr : _ <- N.getAddrInfo (Just hints)
                    (Just (T.unpack (T.dropAround (`elem` ("[]" :: String)) (T.dropEnd 1 host))))
                    (Just (T.unpack port))
      sock <- N.socket (N.addrFamily addr) N.Stream N.defaultProtocol
      (N.connect sock (N.addrAddress addr) >> N.setSocketOption sock N.NoDelay 1) `onException` N.close sock
      pure sock
  | null address = throwIO (CumuloError statusInvalidArgument "no socket to connect to: set CUMULO_SOCKET")
  | otherwise = do
      sock <- N.socket N.AF_UNIX N.Stream N.defaultProtocol
      N.connect sock (N.SockAddrUnix address) `onException` N.close sock
      pure sock

handshake :: N.Socket -> Hello -> Int -> IO (Welcome, B.ByteString)
handshake sock hello ms = do
  NB.sendAll sock (encode (MHello hello))
  result <- timeout (ms * 1000) (go B.empty)
  maybe (throwIO (CumuloError statusTimeout "no WELCOME from the core in time")) pure result
  where
    go buf = case decodeFrame (defaultMaxFrame + requestOverhead) buf of
      Left err -> throwIO err
      Right (Just (MWelcome w, rest)) -> pure (w, rest)
      Right (Just (MError s m, _)) -> throwIO (CumuloError s m)
      Right (Just (other, _)) -> throwIO (CumuloError statusProtocol (T.pack ("expected WELCOME, got " ++ show other)))
      Right Nothing -> do
        chunk <- NB.recv sock readSize
        when (B.null chunk) $ throwIO (ConnectionClosed "the core closed the connection before WELCOME")
        go (buf <> chunk)

-- | Say GOODBYE (after writing anything still queued) and close. Safe to call twice.
close :: API -> IO ()
close api = do
  closed <- readIORef (apiClosed api)
  unless closed $ do
    modifyIORef' (apiOut api) (encode MGoodbye :)
    flush api `catch` \(_ :: SomeException) -> pure ()
    abort api

-- | Connect, run the action, close (also when it throws).
withAPI :: IO API -> (API -> IO a) -> IO a
withAPI open = bracket open close

abort :: API -> IO ()
abort api = do
  closed <- atomicModifyIORef' (apiClosed api) (\c -> (True, c))
  unless closed $ N.close (apiSocket api)

-- ---------------------------------------------------------------- accessors

processIndex, processCount, threadCount, threadIndex, timeoutAsync, timeoutSync,
  timeoutTerminate, nodeId, instanceId, window, maxFrame, keepalive :: API -> Word32
processIndex = welcomeProcessIndex . apiWelcome
processCount = welcomeProcessCount . apiWelcome
threadCount = welcomeThreadCount . apiWelcome
threadIndex = apiThreadIndex
timeoutAsync = welcomeTimeoutAsync . apiWelcome
timeoutSync = welcomeTimeoutSync . apiWelcome
timeoutTerminate = welcomeTimeoutTerminate . apiWelcome
nodeId = welcomeNodeId . apiWelcome
instanceId = welcomeInstanceId . apiWelcome
window = welcomeWindow . apiWelcome
maxFrame = welcomeMaxFrame . apiWelcome
keepalive = welcomeKeepalive . apiWelcome

prefix :: API -> Text
prefix = welcomePrefix . apiWelcome

priorityDefault :: API -> Int8
priorityDefault = welcomePriorityDefault . apiWelcome

-- ---------------------------------------------------------------- reading and writing

-- | Queue a frame, refusing one over the core's limit (the core would close the connection).
queue :: API -> Message -> IO ()
queue api msg = do
  let frame = encode msg
  when (B.length frame - 4 > fromIntegral (maxFrame api)) $
    throwIO (CumuloError statusTooLarge (T.pack ("frame of " ++ show (B.length frame - 4)
      ++ " bytes is over the core's limit of " ++ show (maxFrame api))))
  modifyIORef' (apiOut api) (frame :)

-- | Queue a frame and write it at once, unless handlers are running (their answers go together).
sendNow :: API -> Message -> IO ()
sendNow api msg = do
  queue api msg
  batching <- readIORef (apiInHandlers api)
  unless batching (flush api)

flush :: API -> IO ()
flush api = do
  out <- readIORef (apiOut api)
  unless (null out) $ do
    writeIORef (apiOut api) []
    closed <- readIORef (apiClosed api)
    when closed $ throwIO (ConnectionClosed "the connection is closed")
    NB.sendMany (apiSocket api) (reverse out) `catch` \(e :: IOException) -> do
      abort api
      throwIO (ConnectionClosed ("write to the core failed: " ++ show e))

-- | Read once, waiting up to the deadline (monotonic ns; Nothing: forever),
-- and dispatch every whole frame. False if nothing arrived in time.
receive :: API -> Maybe Word64 -> IO Bool
receive api deadline = do
  closed <- readIORef (apiClosed api)
  when closed $ throwIO (ConnectionClosed "the connection is closed")
  buf <- readIORef (apiBuffer api)
  let want = max readSize (min (4 * 1024 * 1024) (frameNeeds buf - B.length buf))
      reading = NB.recv (apiSocket api) want `catch` \(e :: IOException) -> do
        abort api
        throwIO (ConnectionClosed ("read from the core failed: " ++ show e))
  got <- case deadline of
    Nothing -> Just <$> reading
    Just d -> do
      now <- getMonotonicTimeNSec
      if now >= d then pure Nothing else timeout (fromIntegral ((d - now) `div` 1000) + 1) reading
  case got of
    Nothing -> pure False
    Just chunk -> do
      when (B.null chunk) $ do
        abort api
        throwIO (ConnectionClosed "the core closed the connection")
      dispatchAll api (if B.null buf then chunk else buf <> chunk)
      pure True
  where
    frameNeeds b
      | B.length b < 4 = 0
      | otherwise = 4 + fromIntegral (B.foldr' (\w acc -> acc * 256 + fromIntegral w) (0 :: Word64) (B.take 4 b))

dispatchAll :: API -> B.ByteString -> IO ()
dispatchAll api buf = case decodeFrame receiveLimit buf of
  Left err -> abort api >> throwIO err
  Right Nothing -> writeIORef (apiBuffer api) buf
  Right (Just (msg, rest)) -> dispatch api msg >> dispatchAll api rest
  where
    -- frames from the core may be a REQUEST's overhead over max_frame (without wrapping past 4 GiB)
    receiveLimit = fromInteger (min (toInteger (maxBound :: Word32)) (toInteger (maxFrame api) + toInteger requestOverhead))

dispatch :: API -> Message -> IO ()
dispatch api msg = case msg of
  MRequest r -> modifyIORef' (apiRequests api) (Seq.|> r)
  MResponse a -> modifyIORef' (apiResponses api) (M.insert (answerTransId a) a)
  MPing n -> modifyIORef' (apiOut api) (encode (MPong n) :)
  MPong _ -> pure ()
  MReply r -> modifyIORef' (apiReplies api) (M.insert (replyReqId r) r)
  MMcastSent s -> modifyIORef' (apiMcastSent api) (M.insert (mcastTransId s) (mcastTransIds s))
  MTerminate _ -> writeIORef (apiTerminated api) True
  MError s m -> abort api >> throwIO (CumuloError s m)
  other -> do
    abort api
    throwIO (CumuloError statusProtocol (T.pack ("unexpected frame from the core: " ++ show other)))

-- | Read until @found@ gives a value, flushing first; TIMEOUT at the deadline.
waitFor :: API -> Maybe Word64 -> String -> IO (Maybe a) -> IO a
waitFor api deadline what found = loop
  where
    loop = found >>= maybe next pure
    next = do
      flush api
      arrived <- receive api deadline
      unless arrived $ do
        now <- getMonotonicTimeNSec
        when (maybe False (now >=) deadline) $
          throwIO (CumuloError statusTimeout (T.pack ("no " ++ what ++ " from the core in time")))
      loop

deadlineIn :: API -> Word32 -> IO (Maybe Word64)
deadlineIn api ms = do
  now <- getMonotonicTimeNSec
  pure (Just (now + (fromIntegral ms + localGraceMs + 3 * fromIntegral (keepalive api)) * 1000000))

takeFrom :: Ord k => IORef (M.Map k v) -> k -> IO (Maybe v)
takeFrom ref key = atomicModifyIORef' ref (\m -> (M.delete key m, M.lookup key m))

-- ---------------------------------------------------------------- subscriptions

control :: API -> (Control -> Message) -> Text -> IO Word32
control api make pattern = do
  reqId <- atomicModifyIORef' (apiLastReqId api) (\n -> (n + 1, n + 1))
  sendNow api (make (Control reqId pattern))
  deadline <- deadlineIn api (timeoutSync api)
  reply <- waitFor api deadline "REPLY" (takeFrom (apiReplies api) reqId)
  when (replyStatus reply /= statusOk) $ throwIO (CumuloError (replyStatus reply) (replyMessage reply))
  pure (replyValue reply)

-- | Subscribe @pattern@ (relative to the prefix); the handler serves prefix + pattern.
subscribe :: API -> Text -> Handler -> IO ()
subscribe api pattern handler = do
  _ <- control api MSubscribe pattern
  modifyIORef' (apiHandlers api) (M.insert (prefix api <> pattern) handler)

-- | Remove one subscription of @pattern@ (the handler goes with the last one).
unsubscribe :: API -> Text -> IO ()
unsubscribe api pattern = do
  _ <- control api MUnsubscribe pattern
  left <- subscribeCount api pattern
  when (left == 0) $ modifyIORef' (apiHandlers api) (M.delete (prefix api <> pattern))

-- | How many times this instance subscribed @pattern@.
subscribeCount :: API -> Text -> IO Word32
subscribeCount api = control api MSubscribeCount

-- ---------------------------------------------------------------- sending

-- | A new trans_id (PROTOCOL.md 2.2): time in ns, strictly increasing, then node and instance ids.
newTransId :: API -> IO TransId
newTransId api = do
  MkSystemTime s ns <- getSystemTime
  let now = fromIntegral s * 1000000000 + fromIntegral ns :: Word64
  t <- atomicModifyIORef' (apiLastTime api) (\lastT -> let t = max now (lastT + 1) in (t, t))
  pure (TransId (BL.toStrict (BB.toLazyByteString
    (BB.word64BE t <> BB.word32BE (nodeId api) <> BB.word32BE (instanceId api)))))

-- | Trace context (proto/PROTOCOL.md 5.1): while a handler runs for a
-- request R, 'apiTrace' holds R's traceparent and tracestate pairs, encoded
-- (empty when R has no traceparent, and outside handlers); 'withTrace'
-- appends them to the handler's sends and forwards that give no
-- traceparent. Kept in the 'API': an instance belongs to one thread and runs
-- its handlers one after another ('run' gives each thread its own 'API'),
-- so it never holds two handlers' contexts.
traceOf :: B.ByteString -> B.ByteString
traceOf info
  | not ("traceparent\0" `B.isInfixOf` info) = B.empty  -- the common case, found without parsing
  | otherwise = case infoParse info of
      Right pairs | Just parent <- lookup "traceparent" pairs ->
        infoEncode (("traceparent", parent) : [("tracestate", st) | Just st <- [lookup "tracestate" pairs]])
      _ -> B.empty

withTrace :: API -> B.ByteString -> IO B.ByteString
withTrace api info = do
  trace <- readIORef (apiTrace api)
  pure $ if B.null trace then info else case infoParse info of
    Right pairs | Nothing <- lookup "traceparent" pairs -> info <> trace
    _ -> info  -- it has its own traceparent, or is malformed (the core refuses it)

sendMessage :: API -> (Send -> Message) -> SendOptions -> Text -> B.ByteString -> IO TransId
sendMessage api make opts name body = do
  tid <- newTransId api
  info <- withTrace api (optInfo opts)
  sendNow api (make (Send tid (fromMaybe 0 (optTimeout opts)) (fromMaybe (priorityDefault api) (optPriority opts))
    (if optWaitForService opts then 1 else 0) name info body))
  pure tid

-- | Send a request; its RESPONSE is collected with 'recvAsync'.
sendAsync :: API -> Text -> B.ByteString -> IO TransId
sendAsync api = sendAsyncWith api defaultSend

sendAsyncWith :: API -> SendOptions -> Text -> B.ByteString -> IO TransId
sendAsyncWith api = sendMessage api MSendAsync

-- | Send a request and wait for its answer: (response_info, response), or a
-- 'CumuloError' with the status (TIMEOUT, NO_SERVICE, SERVICE_ERROR, ...).
sendSync :: API -> Text -> B.ByteString -> IO (B.ByteString, B.ByteString)
sendSync api = sendSyncWith api defaultSend

sendSyncWith :: API -> SendOptions -> Text -> B.ByteString -> IO (B.ByteString, B.ByteString)
sendSyncWith api opts name body = do
  tid <- sendMessage api MSendSync opts name body
  deadline <- deadlineIn api (fromMaybe (timeoutSync api) (optTimeout opts))
  a <- waitFor api deadline "RESPONSE" (takeFrom (apiResponses api) tid)
  if answerStatus a == statusOk
    then pure (answerInfo a, answerBody a)
    else throwIO (CumuloError (answerStatus a) (decodeLenient (answerBody a)))

-- | Send to every instance subscribed to a matching pattern; the copies' trans_ids.
mcastAsync :: API -> Text -> B.ByteString -> IO [TransId]
mcastAsync api = mcastAsyncWith api defaultSend

mcastAsyncWith :: API -> SendOptions -> Text -> B.ByteString -> IO [TransId]
mcastAsyncWith api opts name body = do
  tid <- sendMessage api MMcastAsync opts name body
  deadline <- deadlineIn api (fromMaybe (timeoutAsync api) (optTimeout opts))
  waitFor api deadline "MCAST_SENT" (takeFrom (apiMcastSent api) tid)

-- | A RESPONSE kept for an asynchronous send: of that trans_id, or the oldest
-- one (Nothing). Its status may be an error. Waits up to @ms@ (Nothing: timeout_async).
recvAsync :: API -> Maybe TransId -> Maybe Word32 -> IO Answer
recvAsync api tid ms = do
  deadline <- deadlineIn api (fromMaybe (timeoutAsync api) ms)
  waitFor api deadline "RESPONSE" $ case tid of
    Just t -> takeFrom (apiResponses api) t
    Nothing -> atomicModifyIORef' (apiResponses api) $ \m -> case M.minViewWithKey m of
      Just ((_, a), m') -> (m', Just a)
      Nothing -> (m, Nothing)

-- | Pass the request being handled to another name (FORWARD); the handler's
-- answer is then not sent. Timeout Nothing keeps what is left, priority
-- Nothing keeps the request's.
forward :: API -> Request -> Text -> B.ByteString -> B.ByteString -> Maybe Word32 -> Maybe Int8 -> IO ()
forward api req name info body ms priority = do
  info' <- withTrace api info
  sendNow api (MForward (Send (requestTransId req) (fromMaybe 0 ms) (fromMaybe (requestPriority req) priority)
    0 name info' body))
  modifyIORef' (apiForwarded api) (S.insert (requestTransId req))

decodeLenient :: B.ByteString -> Text
decodeLenient = TE.decodeUtf8With TEE.lenientDecode

-- ---------------------------------------------------------------- serving

-- | The event loop: read frames, run handlers, answer PING, keep RESPONSEs.
-- False once TERMINATE has arrived (after serving what was received), True
-- when @ms@ milliseconds pass (Nothing: wait for ever).
poll :: API -> Maybe Int -> IO Bool
poll api ms = do
  deadline <- case ms of
    Nothing -> pure Nothing
    Just t -> Just . (+ fromIntegral (max 0 t) * 1000000) <$> getMonotonicTimeNSec
  let loop = do
        runHandlers api
        terminated <- readIORef (apiTerminated api)
        if terminated
          then flush api >> pure False
          else do
            flush api
            arrived <- receive api deadline
            pending <- not . Seq.null <$> readIORef (apiRequests api)
            terminatedNow <- readIORef (apiTerminated api)
            if arrived || pending || terminatedNow then loop else pure True
  loop

runHandlers :: API -> IO ()
runHandlers api = do
  requests <- atomicModifyIORef' (apiRequests api) (\q -> (Seq.empty, q))
  unless (Seq.null requests) $ do
    writeIORef (apiInHandlers api) True
    mapM_ (handle api) requests `finally` writeIORef (apiInHandlers api) False
    more <- not . Seq.null <$> readIORef (apiRequests api)
    when more (runHandlers api)

handle :: API -> Request -> IO ()
handle api req = do
  handlers <- readIORef (apiHandlers api)
  case M.lookup (requestPattern req) handlers of
    Nothing -> answer api req statusNoService "" (utf8 ("no handler for pattern " <> requestPattern req))
    Just handler -> do
      writeIORef (apiTrace api) $! traceOf (requestInfo req)
      result <- try (handler api req >>= evaluate . forceAnswer) `finally` writeIORef (apiTrace api) B.empty
      forwarded <- atomicModifyIORef' (apiForwarded api)
        (\s -> (S.delete (requestTransId req) s, S.member (requestTransId req) s))
      case result of
        Left (e :: SomeException)
          | Just (_ :: SomeAsyncException) <- fromException e -> throwIO e
          | otherwise -> do
              hPutStrLn stderr ("cumulo: handler for " ++ T.unpack (requestName req) ++ " raised " ++ show e)
              unless forwarded $ answer api req statusServiceError "" (utf8 (T.pack (failure e)))
        Right (info, body) -> unless forwarded $ answer api req statusOk info body
  where
    forceAnswer r@(i, b) = B.length i `seq` B.length b `seq` r
    failure (SomeException inner) = "handler raised " ++ show (typeOf inner) ++ ": " ++ show inner

-- | RETURN; an answer over the frame limit becomes TOO_LARGE.
answer :: API -> Request -> Word16 -> B.ByteString -> B.ByteString -> IO ()
answer api req status info body =
  queue api (MReturn (Answer (requestTransId req) status info body)) `catch` \(e :: CumuloError) ->
    if errorStatus e == statusTooLarge
      then queue api (MReturn (Answer (requestTransId req) statusTooLarge "" (utf8 (errorMessage e))))
      else throwIO e

utf8 :: Text -> B.ByteString
utf8 = TE.encodeUtf8

-- ---------------------------------------------------------------- a whole process

-- | Run a service process: CUMULO_THREAD_COUNT instances, each in its own
-- thread ('forkIO' on the threaded runtime, one capability per instance up to
-- the cores), each calling @setup@ (its subscriptions) and then 'poll' until
-- TERMINATE. Exits the process with 1 if an instance fails.
run :: (API -> IO ()) -> IO ()
run = runWith defaultConfig

runWith :: Config -> (API -> IO ()) -> IO ()
runWith cfg setup = do
  count <- maybe 1 (max 1) . (>>= readMaybe) <$> lookupEnv "CUMULO_THREAD_COUNT"
  cores <- getNumProcessors
  caps <- getNumCapabilities
  when (caps < min count cores) $ setNumCapabilities (min count cores)
  dones <- forM [0 .. count - 1] $ \index -> do
    done <- newEmptyMVar
    _ <- forkIO (try (instanceMain (fromIntegral index)) >>= putMVar done)
    pure done
  results <- mapM takeMVar dones
  let failures = [e | Left (e :: SomeException) <- results]
  forM_ failures $ \e -> hPutStrLn stderr ("cumulo: instance failed: " ++ show e)
  unless (null failures) $ exitWith (ExitFailure 1)
  where
    instanceMain index = withAPI (connectWith cfg {configThreadIndex = index}) $ \api -> do
      setup api
      let serve = poll api Nothing >>= \more -> when more serve
      serve
